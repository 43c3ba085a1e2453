// ChartPanel: one titled QCustomPlot chart with named series, a movable
// "best epoch" marker, mouse zoom and pan, and PNG/CSV export from its
// context menu. Points are appended in batches (the dashboard's UI timer);
// every point is kept. Axes follow the data (of the series shown) until the
// user zooms or pans; a double-click (or "Reset view") makes them follow
// again. A click on a legend entry hides or shows its series.
#pragma once

#include <QColor>
#include <QHash>
#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QLabel;

namespace strata::ui {

class ChartPanel : public QWidget {
    Q_OBJECT
public:
    enum class Axis { Left, Right };
    enum class Style { Line, Dots, LineWithDots, LineWithSmallDots };

    ChartPanel(const QString& title, const QString& xLabel, const QString& yLabel, QWidget* parent = nullptr);

    void setRightAxisLabel(const QString& label);
    void addSeries(const QString& name, const QString& label, const QColor& color, Style style = Style::Line,
                   Axis axis = Axis::Left);
    bool hasSeries(const QString& name) const { return m_series.contains(name); }
    // Removes a series and its points (the Runs view's overlays come and go).
    void removeSeries(const QString& name);
    // Keys must be non-decreasing within a series.
    void append(const QString& name, const QVector<double>& keys, const QVector<double>& values);
    int pointCount(const QString& name) const;
    // Hides or shows a series (a click on its legend entry toggles it); a hidden series keeps its points
    // and its legend entry (greyed), and the axes follow the series shown.
    void setSeriesVisible(const QString& name, bool visible);
    bool seriesVisible(const QString& name) const;
    // Whether the axes follow the data (false once the user drags or zooms, until resetView).
    bool followsData() const { return m_followData; }
    QStringList seriesNames() const;
    // Vertical marker at x (e.g. the best epoch); hidden by clearMarker().
    void setMarker(double x, const QString& label);
    void clearMarker();
    bool markerVisible() const;
    double markerX() const;
    // Removes every point (keeps the series).
    void clear();
    // Rescales (unless the user has zoomed or panned) and queues a repaint, when something changed
    // since the last repaint (the dashboard calls it for every chart on each flush).
    void refresh();
    void resetView();
    void setLegendCorner(Qt::Alignment corner);
    // The left axis keeps this range when following the data (e.g. 0..100 for percentages).
    void setFixedLeftRange(double lower, double upper);

    bool savePng(const QString& path, int width = 0, int height = 0);
    // Long format: series,x,y (one row per point), so series with different x stay exact.
    bool saveCsv(const QString& path) const;

    QCustomPlot* plot() const { return m_plot; }

    // A chart under 150 px high (the dashboard at 1280 x 720) is compact: its legend on one line, three ticks
    // on the value axis, no label under the step axis, so the curves keep their room.
    bool isCompact() const { return m_compact; }

protected:
    void showEvent(QShowEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    void showContextMenu(const QPoint& pos);
    void rescaleToData();
    void setCompact(bool compact);

    QString m_title, m_xLabel;
    bool m_compact = false;
    QCustomPlot* m_plot = nullptr;
    QHash<QString, QCPGraph*> m_series;
    QStringList m_order;
    QCPItemStraightLine* m_marker = nullptr;
    QCPItemText* m_markerLabel = nullptr;
    bool m_followData = true;
    bool m_dirty = true;  // data, marker or view changed since the last replot
    bool m_hasRightAxis = false;
    double m_fixedLower = 0, m_fixedUpper = 0;  // equal: the left axis follows the data
};

}  // namespace strata::ui

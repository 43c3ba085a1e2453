// ProjectorPanel: the Projector dock, the embedding projector. The penultimate layer's activations
// (core/infer/Embedding) for the validation samples of the model the Predict dock has loaded, or else of the run
// its picker chooses (the newest with weights), reduced to 2-D by PCA or exact t-SNE (core/infer/Pca, Tsne) and
// drawn as a scatter, one colour per true class, with a legend. Hovering a point shows its sample (thumbnail, or
// the words of a text sample) with its true class and prediction; clicking one selects it (and the Predict dock
// predicts it when it holds the same model). At most `sample limit` samples, evenly spread over the split: exact
// t-SNE is O(n^2) a step. Loading, embedding and reducing run on a pool thread with progress and Cancel; a newer
// request cancels the older job and its result is dropped, so the GUI thread never waits. The embeddings are kept
// while the model and sample limit stay, so switching PCA and t-SNE only reduces again.
#pragma once

#include <QImage>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <atomic>
#include <memory>
#include <vector>

class QComboBox;
class QCustomPlot;
class QCPGraph;
class QLabel;
class QMouseEvent;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace strata::ui {

class PredictPanel;
class ProjectDocument;
struct ProjectorEmbedding;
struct ProjectorJob;
struct ProjectorResult;

class ProjectorPanel : public QWidget {
    Q_OBJECT
public:
    enum class Method { Pca, Tsne };
    struct Point {
        double x = 0, y = 0;
        qint64 sample = -1;  // the index in the validation split
        int label = -1, predicted = -1;
    };

    // predict: the dock whose model is projected (and whose run picker names the run otherwise); doc: the open
    // project, whose data set is read. Both may be null in tests, then only setModelSource's file is used.
    ProjectorPanel(ProjectDocument* doc, PredictPanel* predict, QWidget* parent = nullptr);
    ~ProjectorPanel() override;

    // The model file to project instead of the Predict dock's, and the project whose data set it reads
    // (tests and the benchmark; empty: follow the Predict dock).
    void setModelSource(const QString& modelPath, const QString& projectPath);
    void setMethod(Method method);
    Method method() const;
    void setSampleLimit(int limit);
    int sampleLimit() const;

    // Starts a job (cancelling and dropping the one running); the Compute button.
    void compute();
    void cancel();
    bool isComputing() const { return m_running > 0; }
    // The latest computed projection.
    const QVector<Point>& points() const { return m_points; }
    QStringList classNames() const { return m_classNames; }
    QString statusText() const;
    QString errorText() const;
    QCustomPlot* plot() const { return m_plot; }
    // A point's position in the plot widget's pixels.
    QPoint pixelOf(int point) const;
    // The point nearest a pixel, within a few pixels; -1 when none.
    int pointAt(const QPoint& pixel) const;
    qint64 selectedSample() const { return m_selected >= 0 ? m_points[m_selected].sample : -1; }
    // What the side panel says about the hovered or selected point: true class and prediction (and words).
    QString detailText() const;
    // Jobs started so far (tests: a stale one is dropped).
    int jobsStarted() const { return m_jobsStarted; }

signals:
    void computed();
    void failed(const QString& message);
    void sampleSelected(qint64 sample);

protected:
    void showEvent(QShowEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void finish(const std::shared_ptr<ProjectorResult>& result, quint64 generation);
    void showPoints();
    void showDetail(int point);
    void setComputing(bool on);
    QString currentSource(QString* projectPath, QString* why) const;

    ProjectDocument* m_doc;
    PredictPanel* m_predict;
    QString m_fixedSource, m_fixedProject;
    QComboBox* m_method;
    QSpinBox* m_limit;
    QPushButton *m_compute, *m_cancel;
    QProgressBar* m_progress;
    QLabel *m_status, *m_error, *m_thumb, *m_detail;
    QCustomPlot* m_plot;
    QCPGraph* m_highlight = nullptr;
    QTimer* m_poll;

    quint64 m_generation = 0;
    int m_running = 0;
    int m_jobsStarted = 0;
    std::shared_ptr<ProjectorJob> m_job;              // the current job's progress and cancel flag
    std::shared_ptr<const ProjectorEmbedding> m_emb;  // the embeddings behind the points shown
    bool m_stale = true;                              // the model changed since the last projection
    QVector<Point> m_points;
    QStringList m_classNames;
    int m_selected = -1, m_hovered = -1;
};

}  // namespace strata::ui

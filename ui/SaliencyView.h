// SaliencyView: where the model looked, in the Predict dock (PredictPanel hosts it). For image models a Grad-CAM
// overlay on the sample picture (a toggle, the class to explain, default the predicted one, the Conv2D layer, the
// overlay's opacity); for text models a strip of the tokens shaded by the class score's gradient at their
// embedding vectors, shown under the attention strip. The maps come from core/infer/Saliency, computed on a
// worker thread (QtConcurrent), one job at a time: a newer request waits for the running one, whose result is
// then dropped. Here only the colour map and the blending of a computed map are drawn.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QStringList>
#include <QWidget>
#include <memory>
#include <string>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;
class QSlider;

namespace strata {
struct ExportModel;
}

namespace strata::ui {

struct SaliencyEngine;

class SaliencyView : public QWidget {
    Q_OBJECT
public:
    explicit SaliencyView(QWidget* parent = nullptr);
    ~SaliencyView() override;

    // The token strip, for the host to place beside its attention strip (hidden for image models).
    QLabel* tokenStrip() const { return m_tokens; }
    QCheckBox* overlayToggle() const { return m_toggle; }
    QComboBox* classCombo() const { return m_class; }  // item 0 follows the predicted class
    QComboBox* layerCombo() const { return m_layer; }
    QSlider* opacitySlider() const { return m_opacity; }

    // A loaded model (kept alive by the pointer) and its class names; null clears everything.
    void setModel(std::shared_ptr<const ExportModel> model, const QStringList& classNames, bool text);
    // The sample predicted: its model input (normalized as the model takes it; token ids for text), the picture
    // shown for it (image models), its predicted class and, for text, the token at each position.
    void setSample(std::vector<float> input, const QImage& picture, int predicted, std::vector<std::string> words);
    // The picture is drawn this size (the host's view).
    void setDisplaySize(const QSize& size) { m_displaySize = size; }

    bool isBusy() const;
    // The class and layer of the map shown, the map itself (input height x width, 0..1; empty when none is
    // shown), and the picture with it blended over (or the plain picture when the overlay is off).
    int shownClass() const { return m_shownClass; }
    QString shownLayer() const { return m_shownLayer; }
    const std::vector<float>& shownMap() const { return m_map; }
    QImage picture() const { return m_composed; }
    QString caption() const;
    QString tokenText() const;
    QString errorText() const { return m_error; }

signals:
    // The picture to show in the host's view: the overlay, or the plain picture.
    void pictureChanged(const QImage& picture);
    // A map or token strip arrived (or its error).
    void saliencyReady();

private:
    struct Job;
    void request();
    void finished();
    void compose();
    int classToExplain() const;

    QCheckBox* m_toggle = nullptr;
    QComboBox* m_class = nullptr;
    QComboBox* m_layer = nullptr;
    QSlider* m_opacity = nullptr;
    QLabel* m_caption = nullptr;
    QLabel* m_tokens = nullptr;
    QFutureWatcher<void>* m_watcher = nullptr;

    std::shared_ptr<SaliencyEngine> m_engine;
    bool m_text = false;
    std::vector<float> m_input;
    QImage m_picture;
    int m_predicted = -1;
    std::vector<std::string> m_words;
    QSize m_displaySize{136, 136};

    quint64 m_latest = 0;  // the newest request's number; a job finishing with another is stale
    bool m_pending = false;
    std::shared_ptr<Job> m_job;

    int m_shownClass = -1;
    QString m_shownLayer;
    std::vector<float> m_map;
    int m_mapWidth = 0, m_mapHeight = 0;
    QImage m_composed;
    QString m_error;
};

}  // namespace strata::ui

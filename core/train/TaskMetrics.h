// TaskMetrics: the metrics of the tasks other than classification (core/graph/Task.h), over a whole split, from the
// model's outputs and the targets on the host. Regression: MAE, RMSE and R^2 per target in the data's units (the
// target standardization undone on both sides); multi-label: micro and macro F1 and each label's precision and
// recall at the decision threshold, and each label's best threshold (the F1-maximizing one, from every output the
// split gave); image to image: PSNR (dB, per image, averaged) with the pixel range of the input normalization.
// The Trainer's validation, strata-train's evaluation and the Predict dock use it, so a number means the same
// everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/Normalization.h"
#include "core/graph/Settings.h"

namespace strata {

// "r2" (the task's score), "mae[price]" (per target), "precision[admin]"...: one value of a split.
struct NamedMetric {
    std::string name;
    double value = 0;
    bool operator==(const NamedMetric&) const = default;
};

// A metric's value as the CLI and the panels print it: four significant digits ("0.8731", "27.41", "1.234e+05").
std::string formatMetric(double value);

// The value named `name` in `metrics`; NaN when absent.
double metricValue(const std::vector<NamedMetric>& metrics, const std::string& name);

// Regression metrics of one target over a split, in the data's units.
struct RegressionTargetMetrics {
    double mae = 0, rmse = 0, r2 = 0;
};

// A label's counts at a threshold, and its best threshold.
struct LabelMetrics {
    int64_t truePositives = 0, falsePositives = 0, falseNegatives = 0;
    double precision = 0, recall = 0, f1 = 0;  // 0 where the denominator is 0 (as scikit-learn's zero_division=0)
    double bestThreshold = 0.5, bestF1 = 0;
};

// The peak-to-peak pixel range of images in model units under `norm` (255 raw levels: 255 * scale / std); PSNR's
// peak.
double pixelPeak(const Normalization& norm);

class TaskMetrics {
public:
    // outputs: values per sample (targets per sample, labels, or pixels). targetNormalization: regression's
    // (per target statistics, or mode none). threshold: multi-label's. inputNormalization: image to image's pixels.
    TaskMetrics(TaskKind task, int64_t outputs, std::vector<std::string> names = {},
                Normalization targetNormalization = {}, double threshold = 0.5,
                const Normalization& inputNormalization = {});

    // `rows` samples of model outputs (logits for multi-label) and their targets (training targets: standardized
    // for regression), `outputs` values each.
    void add(const float* outputs, const float* targets, int64_t rows);
    int64_t samples() const { return m_rows; }

    std::vector<RegressionTargetMetrics> regression() const;
    std::vector<LabelMetrics> labels() const;
    double microF1() const;
    double macroF1() const;
    double psnr() const;  // the mean of the images' PSNR; +inf images (exact) count as 100 dB
    // The task's score (Task.h's taskScoreName): mean R^2, micro F1 or PSNR.
    double score() const;
    // Every metric by name: regression "mae", "rmse", "r2" (means over targets) and, with several targets,
    // "mae[NAME]"...; multi-label "micro_f1", "macro_f1", "precision[NAME]", "recall[NAME]", "best_threshold[NAME]";
    // image to image "psnr".
    std::vector<NamedMetric> all() const;

private:
    TaskKind m_task;
    int64_t m_outputs;
    std::vector<std::string> m_names;
    Normalization m_targetNorm;
    double m_threshold;
    double m_peak = 1;
    int64_t m_rows = 0;
    // regression, per target: sums of |e|, e^2, y, y^2 in data units
    std::vector<double> m_absErr, m_sqErr, m_sumY, m_sumY2;
    // multi-label: every (probability, truth) per label (the best threshold needs them all)
    std::vector<std::vector<std::pair<float, bool>>> m_scores;
    // image to image: the sum of the images' PSNR
    double m_psnrSum = 0;
};

}  // namespace strata

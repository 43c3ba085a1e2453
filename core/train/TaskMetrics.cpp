// TaskMetrics: see TaskMetrics.h.
#include "core/train/TaskMetrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace strata {

namespace {

constexpr double kExactPsnr = 100.0;  // an exact reconstruction's PSNR (infinite) counts as this

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

std::string formatMetric(double value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", value);
    return buf;
}

double metricValue(const std::vector<NamedMetric>& metrics, const std::string& name) {
    for (const NamedMetric& m : metrics)
        if (m.name == name) return m.value;
    return std::numeric_limits<double>::quiet_NaN();
}

double pixelPeak(const Normalization& norm) {
    if (norm.mode == "none" || norm.mode.empty()) return 255.0;
    if (!norm.featureStd.empty()) {
        // Per-channel statistics: the channels' mean range (they differ little for images).
        double sum = 0;
        for (float s : norm.featureStd) sum += 255.0 * norm.scale / s;
        return sum / static_cast<double>(norm.featureStd.size());
    }
    return 255.0 * norm.scale / norm.std;
}

TaskMetrics::TaskMetrics(TaskKind task, int64_t outputs, std::vector<std::string> names,
                         Normalization targetNormalization, double threshold, const Normalization& inputNormalization)
    : m_task(task),
      m_outputs(outputs),
      m_names(std::move(names)),
      m_targetNorm(std::move(targetNormalization)),
      m_threshold(threshold) {
    if (outputs < 1) throw std::invalid_argument("TaskMetrics: no outputs");
    const auto n = static_cast<size_t>(outputs);
    if (m_task == TaskKind::Regression) {
        if (!m_targetNorm.featureStd.empty() && m_targetNorm.featureStd.size() != n)
            throw std::invalid_argument("TaskMetrics: " + std::to_string(m_targetNorm.featureStd.size()) +
                                        " target statistics for " + std::to_string(outputs) + " targets");
        m_absErr.assign(n, 0);
        m_sqErr.assign(n, 0);
        m_sumY.assign(n, 0);
        m_sumY2.assign(n, 0);
    } else if (m_task == TaskKind::MultiLabel) {
        m_scores.resize(n);
    } else if (m_task == TaskKind::ImageToImage) {
        m_peak = pixelPeak(inputNormalization);
    }
    if (m_names.size() != n) {
        m_names.clear();
        for (int64_t i = 0; i < outputs; ++i) m_names.push_back(std::to_string(i));
    }
}

void TaskMetrics::add(const float* outputs, const float* targets, int64_t rows) {
    const auto n = static_cast<size_t>(m_outputs);
    for (int64_t r = 0; r < rows; ++r) {
        const float* o = outputs + static_cast<size_t>(r) * n;
        const float* t = targets + static_cast<size_t>(r) * n;
        if (m_task == TaskKind::Regression) {
            const bool standardized = !m_targetNorm.featureStd.empty();
            for (size_t j = 0; j < n; ++j) {
                // Back to data units: x = x' * std + mean, on both sides.
                const double s = standardized ? m_targetNorm.featureStd[j] : 1.0;
                const double m = standardized ? m_targetNorm.featureMean[j] : 0.0;
                const double y = double(t[j]) * s + m, p = double(o[j]) * s + m;
                const double e = p - y;
                m_absErr[j] += std::fabs(e);
                m_sqErr[j] += e * e;
                m_sumY[j] += y;
                m_sumY2[j] += y * y;
            }
        } else if (m_task == TaskKind::MultiLabel) {
            for (size_t j = 0; j < n; ++j)
                m_scores[j].emplace_back(static_cast<float>(1.0 / (1.0 + std::exp(-double(o[j])))), t[j] >= 0.5f);
        } else if (m_task == TaskKind::ImageToImage) {
            double se = 0;
            for (size_t j = 0; j < n; ++j) {
                const double d = double(o[j]) - t[j];
                se += d * d;
            }
            const double mse = se / static_cast<double>(n);
            m_psnrSum += mse > 0 ? std::min(kExactPsnr, 10.0 * std::log10(m_peak * m_peak / mse)) : kExactPsnr;
        }
    }
    m_rows += rows;
}

std::vector<RegressionTargetMetrics> TaskMetrics::regression() const {
    std::vector<RegressionTargetMetrics> out(m_absErr.size());
    if (m_rows == 0) return out;
    const auto rows = static_cast<double>(m_rows);
    for (size_t j = 0; j < out.size(); ++j) {
        out[j].mae = m_absErr[j] / rows;
        out[j].rmse = std::sqrt(m_sqErr[j] / rows);
        const double total = m_sumY2[j] - m_sumY[j] * m_sumY[j] / rows;  // sum (y - mean)^2
        // A constant target has no variance to explain: R^2 is 1 for an exact fit, else 0 (scikit-learn's).
        out[j].r2 = total > 0 ? 1.0 - m_sqErr[j] / total : (m_sqErr[j] == 0 ? 1.0 : 0.0);
    }
    return out;
}

std::vector<LabelMetrics> TaskMetrics::labels() const {
    std::vector<LabelMetrics> out(m_scores.size());
    for (size_t j = 0; j < m_scores.size(); ++j) {
        LabelMetrics& l = out[j];
        int64_t positives = 0;
        for (const auto& [p, truth] : m_scores[j]) {
            const bool predicted = p >= m_threshold;
            l.truePositives += predicted && truth;
            l.falsePositives += predicted && !truth;
            l.falseNegatives += !predicted && truth;
            positives += truth;
        }
        l.precision = ratio(double(l.truePositives), double(l.truePositives + l.falsePositives));
        l.recall = ratio(double(l.truePositives), double(l.truePositives + l.falseNegatives));
        l.f1 = ratio(2.0 * double(l.truePositives), double(2 * l.truePositives + l.falsePositives + l.falseNegatives));
        // The best threshold: predicting the k most probable samples positive for every k; the threshold is the
        // k-th probability (ties taken together).
        std::vector<std::pair<float, bool>> sorted = m_scores[j];
        std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        int64_t tp = 0, fp = 0;
        l.bestThreshold = m_threshold;
        l.bestF1 = ratio(0.0, double(positives));
        for (size_t k = 0; k < sorted.size(); ++k) {
            (sorted[k].second ? tp : fp) += 1;
            if (k + 1 < sorted.size() && sorted[k + 1].first == sorted[k].first) continue;
            const double f1 = ratio(2.0 * double(tp), double(2 * tp + fp + (positives - tp)));
            if (f1 > l.bestF1) {
                l.bestF1 = f1;
                l.bestThreshold = sorted[k].first;
            }
        }
    }
    return out;
}

double TaskMetrics::microF1() const {
    int64_t tp = 0, fp = 0, fn = 0;
    for (const LabelMetrics& l : labels()) {
        tp += l.truePositives;
        fp += l.falsePositives;
        fn += l.falseNegatives;
    }
    return ratio(2.0 * double(tp), double(2 * tp + fp + fn));
}

double TaskMetrics::macroF1() const {
    const std::vector<LabelMetrics> l = labels();
    if (l.empty()) return 0;
    double sum = 0;
    for (const LabelMetrics& x : l) sum += x.f1;
    return sum / static_cast<double>(l.size());
}

double TaskMetrics::psnr() const { return m_rows ? m_psnrSum / static_cast<double>(m_rows) : 0.0; }

double TaskMetrics::score() const {
    switch (m_task) {
        case TaskKind::Regression: {
            const std::vector<RegressionTargetMetrics> r = regression();
            double sum = 0;
            for (const RegressionTargetMetrics& x : r) sum += x.r2;
            return r.empty() ? 0.0 : sum / static_cast<double>(r.size());
        }
        case TaskKind::MultiLabel: return microF1();
        case TaskKind::ImageToImage: return psnr();
        case TaskKind::Classification: break;
    }
    return 0;
}

std::vector<NamedMetric> TaskMetrics::all() const {
    std::vector<NamedMetric> out;
    if (m_task == TaskKind::Regression) {
        const std::vector<RegressionTargetMetrics> r = regression();
        double mae = 0, rmse = 0, r2 = 0;
        for (const RegressionTargetMetrics& x : r) {
            mae += x.mae;
            rmse += x.rmse;
            r2 += x.r2;
        }
        const auto k = static_cast<double>(std::max<size_t>(1, r.size()));
        out.push_back({"mae", mae / k});
        out.push_back({"rmse", rmse / k});
        out.push_back({"r2", r2 / k});
        if (r.size() > 1)
            for (size_t j = 0; j < r.size(); ++j) {
                out.push_back({"mae[" + m_names[j] + "]", r[j].mae});
                out.push_back({"rmse[" + m_names[j] + "]", r[j].rmse});
                out.push_back({"r2[" + m_names[j] + "]", r[j].r2});
            }
    } else if (m_task == TaskKind::MultiLabel) {
        out.push_back({"micro_f1", microF1()});
        out.push_back({"macro_f1", macroF1()});
        const std::vector<LabelMetrics> l = labels();
        for (size_t j = 0; j < l.size(); ++j) {
            out.push_back({"precision[" + m_names[j] + "]", l[j].precision});
            out.push_back({"recall[" + m_names[j] + "]", l[j].recall});
            out.push_back({"best_threshold[" + m_names[j] + "]", l[j].bestThreshold});
        }
    } else if (m_task == TaskKind::ImageToImage) {
        out.push_back({"psnr", psnr()});
    }
    return out;
}

}  // namespace strata

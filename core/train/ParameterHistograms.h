// ParameterHistograms: weight and gradient histograms over a run, and what they say about each layer.
//   - HistogramHook (a StepHook, StepHooks.h's kind) samples every N steps on the engine thread, after the update:
//     for every trainable parameter, a histogram of its values and one of its gradients (a fixed number of bins
//     over the tensor's finite range, with its mean, RMS, zeros and non-finite count: a few hundred bytes per
//     tensor), and for every ReLU the fraction of its units that gave 0 for every sample of the batch (dead).
//   - assessLayers turns one sample into a per-layer verdict: a gradient that vanishes or explodes next to the
//     other layers', a ReLU mostly dead. The workbench shows it as a badge on the node.
//   - heatMap re-bins a layer's histograms over time onto one value range, a column per sample, for the heat map.
// Samples go to the TrainingObserver (onHistograms) and, with a run folder, to histograms.jsonl in it (one JSON
// object per sample, appended), so a run's histograms are kept with its checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/graph/Settings.h"
#include "core/train/TrainingStep.h"

namespace strata {

class Graph;
class Model;

struct ValueHistogram {
    float lo = 0, hi = 0;          // the bins' range: bin i holds [lo + i w, lo + (i+1) w), the last also hi
    std::vector<uint32_t> counts;  // equal-width bins; values outside [lo, hi] do not occur (lo, hi: finite min, max)
    int64_t count = 0;             // finite values
    int64_t zeros = 0, nonFinite = 0;
    double mean = 0, rms = 0;  // of the finite values
    bool operator==(const ValueHistogram&) const = default;
};
// Equal-width bins over the finite values' [min, max]; all values equal: one range of width 0, every value in
// the middle bin. bins >= 1.
ValueHistogram histogramOf(const float* values, int64_t n, int bins);

struct ParameterSample {
    int node = -1;
    std::string layer, parameter;  // the node's name, the parameter's ("weight")
    ValueHistogram values, gradients;
    bool operator==(const ParameterSample&) const = default;
};

struct ReluSample {
    int node = -1;
    std::string layer;
    int64_t units = 0;        // per sample
    double deadFraction = 0;  // of the units, 0 for every sample of the batch
    bool operator==(const ReluSample&) const = default;
};

struct HistogramSample {
    int64_t step = 0;  // 0-based global step after whose update it was taken
    int epoch = 0;
    std::vector<ParameterSample> parameters;
    std::vector<ReluSample> relus;
    bool operator==(const HistogramSample&) const = default;
};
Json histogramSampleToJson(const HistogramSample& sample);
// Throws std::invalid_argument naming the field at fault.
HistogramSample histogramSampleFromJson(const Json& json);
// A run folder's histograms.jsonl, in order; a torn last line (a crash mid-write) is skipped.
std::vector<HistogramSample> readHistogramFile(const std::string& path);
constexpr const char* kHistogramFileName = "histograms.jsonl";

enum class GradientHealth { Ok, Vanishing, Exploding };
struct LayerHealth {
    int node = -1;
    std::string layer;
    double gradientRms = 0;  // over the layer's trainable parameters' gradients
    GradientHealth gradient = GradientHealth::Ok;
    double deadFraction = -1;  // a ReLU's; -1: not a ReLU
    bool dead = false;         // deadFraction >= kDeadReluFraction
    std::string text;          // one line: what is wrong and what to try; empty when nothing is
};
// A layer's gradient RMS below kVanishingRatio times the median of the layers' (or exactly 0) vanishes; above
// kExplodingRatio times the median (or not finite) explodes. One layer alone is compared with nothing but 0 and
// infinity.
constexpr double kVanishingRatio = 1e-3, kExplodingRatio = 1e3, kDeadReluFraction = 0.5;
std::vector<LayerHealth> assessLayers(const HistogramSample& sample);

// A sample with its verdicts, as the workbench receives it (assessed on the engine thread).
struct HistogramReport {
    HistogramSample sample;
    std::vector<LayerHealth> health;
};

// Histograms of one tensor over time re-binned onto a shared value range [lo, hi] in `rows` equal bins: each bin's
// count is spread over the rows its range overlaps, in proportion, then each column divided by its count (a
// column sums to 1; an empty histogram's column is 0). Row-major: rows x columns (one column per histogram).
struct HeatMap {
    int rows = 0, columns = 0;
    float lo = 0, hi = 0;
    std::vector<float> cells;
    float at(int row, int column) const { return cells[size_t(row) * size_t(columns) + size_t(column)]; }
};
HeatMap heatMap(const std::vector<ValueHistogram>& histograms, int rows);

// Comparing runs (the Runs view's "Compare histograms"): one tensor's histogram from each run at one step,
// re-binned onto one value range so their shapes can be overlaid.
// The tensors' names ("layer.parameter") in the samples, in the order first seen.
std::vector<std::string> histogramTensorNames(const std::vector<HistogramSample>& samples);
struct RunHistograms {
    std::string label;  // the run, in words ("run 12")
    std::vector<HistogramSample> samples;
    std::string missing;  // why the run has none ("no histograms.jsonl in <folder>"); empty when it has some
};
// A run folder's histograms; a folder without the file (histograms were off), an empty folder name (the run kept
// no folder) or an unreadable file give no samples and `missing` says which.
RunHistograms readRunHistograms(const std::string& label, const std::string& runFolder);
struct HistogramComparison {
    std::string tensor;
    bool gradients = false;
    // Per run, in order: the step of the sample used (-1 when the run has none of this tensor) and why not.
    std::vector<int64_t> steps;
    std::vector<std::string> missing;
    // One column per run on a shared value range, each summing to 1 (a run without the tensor: a column of 0).
    HeatMap shares;
};
// `tensor`'s values or gradients in each run at the last sample taken at or before `step` (step < 0: each run's
// last sample), re-binned onto `bins` shared bins.
HistogramComparison compareRunHistograms(const std::vector<RunHistograms>& runs, const std::string& tensor,
                                         bool gradients, int64_t step, int bins);

class HistogramHook : public StepHook {
public:
    using Sink = std::function<void(const HistogramSample&)>;
    // every >= 1 steps (step 0 sampled first), bins per histogram; graph: for the layers' names.
    HistogramHook(Model& model, const Graph& graph, int every, int bins, Sink sink);
    void afterUpdate(const StepInput& in) override;
    // Samples now, whatever the step (tests, the last step of a run).
    HistogramSample sample(const StepInput& in);

private:
    Model& m_model;
    const Graph& m_graph;
    int m_every, m_bins;
    Sink m_sink;
    std::vector<uint8_t> m_alive;
    std::vector<float> m_host;  // reused: no allocation per sample once the largest tensor has been seen
};

}  // namespace strata

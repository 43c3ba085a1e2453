#include "core/train/Checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>

#include "core/graph/Model.h"
#include "core/io/Base64.h"
#include "core/io/Checksum.h"
#include "core/io/InputLimits.h"
#include "core/io/JsonInput.h"
#include "core/io/Safetensors.h"
#include "core/train/ProjectFingerprint.h"

namespace strata {

namespace fs = std::filesystem;

namespace {
constexpr const char* kMetaKey = "strata.checkpoint";
constexpr const char* kOptimPrefix = "optim.";
constexpr const char* kMaskPrefix = "mask.";
// A run resumed with more epochs than its project planned (the --epochs override) writes epochs past the plan.
constexpr int64_t kMaxEpochsPastPlan = int64_t{1} << 20;
// Metadata a crafted or damaged file could carry and a run would act on: counts in range, a normalization
// that divides by a positive std. Throws std::runtime_error naming the file and the field.
void checkCheckpointFields(const std::string& path, const Checkpoint& c) {
    auto bad = [&](const std::string& what) { throw std::runtime_error(path + ": checkpoint metadata: " + what); };
    constexpr int64_t kMaxSteps = int64_t{1} << 48;
    if (c.epoch < 0 || int64_t{c.epoch} > int64_t{c.project.training.epochs} + kMaxEpochsPastPlan)
        bad("epoch " + std::to_string(c.epoch) + " is out of range (0 to the project's " +
            std::to_string(c.project.training.epochs) + " epochs)");
    if (c.step < 0 || c.step > kMaxSteps) bad("step " + std::to_string(c.step) + " is out of range");
    if (c.stepInEpoch < 0 || c.stepInEpoch > c.step)
        bad("step_in_epoch " + std::to_string(c.stepInEpoch) + " is out of range (0 to step " + std::to_string(c.step) +
            ")");
    try {
        checkNormalizationValues(c.normalization);
        checkNormalizationValues(c.targetNormalization);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
    if (!c.targetNormalization.featureStd.empty() && c.targetNormalization.featureStd.size() != c.classNames.size())
        bad("target_normalization has " + std::to_string(c.targetNormalization.featureStd.size()) +
            " targets' statistics for " + std::to_string(c.classNames.size()) + " targets");
}

Json normalizationJson(const Normalization& n) {
    return {{"mode", n.mode},
            {"scale", n.scale},
            {"mean", n.mean},
            {"std", n.std},
            {"feature_mean", n.featureMean},
            {"feature_std", n.featureStd}};
}

Normalization normalizationFromJson(const Json& n) {
    Normalization out;
    out.mode = n.at("mode").get<std::string>();
    out.scale = n.at("scale").get<float>();
    out.mean = n.at("mean").get<float>();
    out.std = n.at("std").get<float>();
    out.featureMean = n.value("feature_mean", std::vector<float>{});
    out.featureStd = n.value("feature_std", std::vector<float>{});
    return out;
}

// The metadata's checksum: XXH3 of the metadata text as written, and of each top-level field's canonical JSON
// (ordered, as dump() writes it), which names the fields an edit changed.
constexpr const char* kMetaChecksumKey = "strata.checkpoint.xxh3_64";

std::string textChecksum(const std::string& text) { return checksumHex(tensorChecksum(text.data(), text.size())); }

Json metadataChecksums(const std::string& text, const Json& meta) {
    Json fields = Json::object();
    for (auto it = meta.begin(); it != meta.end(); ++it) fields[it.key()] = textChecksum(it.value().dump());
    return Json{{"metadata", textChecksum(text)}, {"fields", fields}};
}

// A file written by this build carries the checksum and must match it; one written before it had none and loads
// as it is. Throws std::runtime_error naming the fields that changed.
void checkMetadataChecksum(const std::string& path, const std::map<std::string, std::string>& metadata,
                           const std::string& text) {
    auto it = metadata.find(kMetaChecksumKey);
    if (it == metadata.end()) return;
    const Json stored = tryParseJson<Json>(it->second);
    if (!stored.is_object() || !stored.contains("metadata") || !stored["metadata"].is_string() ||
        !stored.contains("fields") || !stored["fields"].is_object())
        throw std::runtime_error(path + ": checkpoint metadata checksum ('" + kMetaChecksumKey + "') is malformed");
    const std::string actual = textChecksum(text);
    const std::string expected = stored["metadata"].get<std::string>();
    if (actual == expected) return;
    std::string msg = path + ": checkpoint metadata was changed after it was written (checksum " +
                      cutForMessage(expected, 32) + ", the metadata's " + actual + ")";
    // Which fields: each one's canonical text against the checksum stored for it.
    const Json meta = tryParseJson<Json>(text);
    std::vector<std::string> changed;
    if (meta.is_object()) {
        const Json& fields = stored["fields"];
        for (auto f = meta.begin(); f != meta.end(); ++f)
            if (!fields.contains(f.key()) || fields[f.key()] != textChecksum(f.value().dump()))
                changed.push_back("'" + cutForMessage(f.key(), 64) + "'" +
                                  (fields.contains(f.key()) ? "" : " (added)"));
        for (auto f = fields.begin(); f != fields.end(); ++f)
            if (!meta.contains(f.key())) changed.push_back("'" + cutForMessage(f.key(), 64) + "' (removed)");
    }
    if (!changed.empty()) {
        msg += ": changed ";
        for (size_t i = 0; i < changed.size(); ++i) msg += (i ? ", " : "") + changed[i];
    }
    throw std::runtime_error(msg +
                             "; a checkpoint's metadata is not for editing (train again, or start from its "
                             "weights with --init-from)");
}

}  // namespace

std::map<std::string, std::vector<float>> modelWeights(Model& model) {
    std::map<std::string, std::vector<float>> out;
    for (const auto& np : model.namedParameters()) {
        std::vector<float> host(static_cast<size_t>(np.param->value.numel()));
        model.backend().toHost(np.param->value, host.data());
        out[np.name] = std::move(host);
    }
    return out;
}

void applyWeights(Model& model, const std::map<std::string, std::vector<float>>& weights) {
    for (const auto& np : model.namedParameters()) {
        auto it = weights.find(np.name);
        if (it == weights.end()) throw std::runtime_error("weights for '" + np.name + "' are missing");
        if (static_cast<int64_t>(it->second.size()) != np.param->value.numel())
            throw std::runtime_error("weights for '" + np.name + "' have " + std::to_string(it->second.size()) +
                                     " values, the model expects " + std::to_string(np.param->value.numel()) + " (" +
                                     np.param->value.shape().toString() + ")");
        model.backend().copyFromHost(np.param->value.raw(), it->second.data(), np.param->value.bytes());
    }
    if (model.weightsFrozen()) model.freezeWeights();  // new values, new ids
}

std::string InitFromReport::summary(const std::string& file) const {
    const size_t total = copied.size() + skipped.size();
    std::string s = "initialized " + std::to_string(copied.size()) + " of " + std::to_string(total) + " tensor" +
                    (total == 1 ? "" : "s") + " from " + file;
    if (skipped.empty()) return s + "; all matched";
    s += "; not matched: ";
    constexpr size_t kShown = 8;  // the rest follow one per line
    for (size_t i = 0; i < skipped.size() && i < kShown; ++i) {
        // "dense2.weight [4, 32]: the checkpoint's is [10, 32]" -> "dense2.weight [4, 32] (the checkpoint's is ...)"
        const std::string& line = skipped[i];
        const size_t colon = line.find(": ");
        s += (i ? ", " : "") +
             (colon == std::string::npos ? line : line.substr(0, colon) + " (" + line.substr(colon + 2) + ")");
    }
    if (skipped.size() > kShown) s += ", and " + std::to_string(skipped.size() - kShown) + " more";
    return s;
}

WeightSource checkpointWeightSource(const Checkpoint& checkpoint, const std::string& file) {
    WeightSource source;
    source.file = file;
    source.kind = "checkpoint";
    source.values = checkpoint.weights;
    source.shapes = graphParameterShapes(checkpoint.project.graph);
    return source;
}

InitFromReport initFromWeights(Model& model, const WeightSource& source) {
    InitFromReport report;
    std::set<std::string> taken;
    for (const auto& np : model.namedParameters()) {
        const Shape& shape = np.param->value.shape();
        const std::string line = np.name + " " + shape.toString();
        auto w = source.values.find(np.name);
        auto s = source.shapes.find(np.name);
        if (w == source.values.end()) {
            report.skipped.push_back(line + ": not in the " + source.kind);
            continue;
        }
        taken.insert(np.name);
        if (s == source.shapes.end() || static_cast<int64_t>(w->second.size()) != s->second.numel()) {
            report.skipped.push_back(line + ": the " + source.kind + "'s graph gives it no shape that fits its " +
                                     std::to_string(w->second.size()) + " values");
            continue;
        }
        if (s->second != shape) {
            report.skipped.push_back(line + ": the " + source.kind + "'s is " + s->second.toString());
            continue;
        }
        model.backend().copyFromHost(np.param->value.raw(), w->second.data(), np.param->value.bytes());
        report.copied.push_back(line);
    }
    for (const auto& [name, values] : source.values)
        if (!taken.count(name)) {
            auto s = source.shapes.find(name);
            report.unused.push_back(
                name + " " +
                (s != source.shapes.end() ? s->second.toString() : std::to_string(values.size()) + " values"));
        }
    if (model.weightsFrozen()) model.freezeWeights();  // new values, new ids
    return report;
}

InitFromReport initFromCheckpoint(Model& model, const Checkpoint& checkpoint) {
    return initFromWeights(model, checkpointWeightSource(checkpoint, {}));
}

void saveCheckpoint(const Checkpoint& c, const std::string& path) {
    Json meta;
    meta["project"] = projectToJson(c.project);
    meta["epoch"] = c.epoch;
    meta["step"] = c.step;
    meta["step_in_epoch"] = c.stepInEpoch;
    meta["has_validation"] = c.hasValidation;
    meta["val_loss"] = c.valLoss;
    meta["val_accuracy"] = c.valAccuracy;
    meta["best"] = c.best;
    meta["normalization"] = normalizationJson(c.normalization);
    if (c.targetNormalization.mode != "none") meta["target_normalization"] = normalizationJson(c.targetNormalization);
    meta["class_names"] = c.classNames;
    meta["vocabulary"] = c.vocabulary;
    if (!c.tokenizerModel.empty()) meta["tokenizer_model"] = base64Encode(c.tokenizerModel);
    meta["trainer_state"] = c.trainerState;

    std::vector<TensorRecord> records;
    for (const auto& [name, values] : c.weights)
        records.push_back(makeF32Record(name, Shape{static_cast<int64_t>(values.size())}, values));
    for (const auto& [name, values] : c.optimizerState)
        records.push_back(makeF32Record(kOptimPrefix + name, Shape{static_cast<int64_t>(values.size())}, values));
    for (const auto& [name, values] : c.masks)
        records.push_back(makeF32Record(kMaskPrefix + name, Shape{static_cast<int64_t>(values.size())}, values));
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    const std::string text = meta.dump();
    writeSafetensors(path, records, {{kMetaKey, text}, {kMetaChecksumKey, metadataChecksums(text, meta).dump()}});
}

std::vector<NumberedCheckpoint> numberedCheckpoints(const std::string& folder) {
    std::vector<NumberedCheckpoint> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
        const std::string n = e.path().filename().string();
        if (e.path().extension() != ".safetensors") continue;
        const bool step = n.rfind("step-", 0) == 0;
        if (!step && n.rfind("epoch-", 0) != 0) continue;
        const std::string digits =
            n.substr(step ? 5 : 6, n.size() - (step ? 5 : 6) - std::string(".safetensors").size());
        if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
            continue;
        out.push_back({e.path().string(), step, std::stoll(digits)});
    }
    // By number, not by name: epoch-999 before epoch-1000.
    std::sort(out.begin(), out.end(), [](const NumberedCheckpoint& a, const NumberedCheckpoint& b) {
        return a.isStep != b.isStep ? !a.isStep : a.number < b.number;
    });
    return out;
}

std::string resolveCheckpointPath(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw std::runtime_error(path + ": no such checkpoint file or folder");
    if (!fs::is_directory(path, ec)) return path;
    for (const char* name : {"best.safetensors", "latest.safetensors"}) {
        const fs::path p = fs::path(path) / name;
        if (fs::exists(p, ec)) return p.string();
    }
    // Fall back to the highest epoch-NNN file.
    std::string latest;
    for (const NumberedCheckpoint& f : numberedCheckpoints(path))
        if (!f.isStep) latest = f.path;
    if (latest.empty()) throw std::runtime_error(path + ": the folder holds no checkpoint (*.safetensors)");
    return latest;
}

ResumePoint findResumePoint(const std::string& path, bool best, const WeightLoadOptions& options) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw std::runtime_error(path + ": no such checkpoint file or folder");
    ResumePoint r;
    if (!fs::is_directory(path, ec)) {
        r.file = path;
        r.checkpoint = loadCheckpoint(path, options);
        return r;
    }
    if (best) {
        r.file = (fs::path(path) / "best.safetensors").string();
        if (!fs::exists(r.file, ec))
            throw std::runtime_error(path + ": no best.safetensors to resume from (the run had no validation?)");
        r.checkpoint = loadCheckpoint(r.file, options);
        return r;
    }
    // The newest good checkpoint: latest.safetensors, the highest epoch file and the highest step file each stand
    // for the newest of their kind (a kill between writing epoch-N and latest leaves epoch-N newer); one that does
    // not load (torn, corrupt) gives way to the next lower of its kind.
    std::vector<NumberedCheckpoint> files = numberedCheckpoints(path);
    std::vector<std::vector<std::string>> kinds(3);
    if (fs::exists(fs::path(path) / "latest.safetensors", ec))
        kinds[0].push_back((fs::path(path) / "latest.safetensors").string());
    for (auto it = files.rbegin(); it != files.rend(); ++it) kinds[it->isStep ? 2 : 1].push_back(it->path);
    bool found = false;
    for (const auto& kind : kinds)
        for (const std::string& file : kind) {
            try {
                Checkpoint c = loadCheckpoint(file, options);
                if (!found || c.step > r.checkpoint.step ||
                    (c.step == r.checkpoint.step && c.epoch > r.checkpoint.epoch)) {
                    r.file = file;
                    r.checkpoint = std::move(c);
                    found = true;
                }
                break;
            } catch (const std::exception& e) {
                r.skipped.push_back(e.what());
            }
        }
    if (!found)
        throw std::runtime_error(path + ": the folder holds no checkpoint that loads" +
                                 (r.skipped.empty() ? std::string() : " (" + r.skipped.front() + ")"));
    return r;
}

Checkpoint loadCheckpoint(const std::string& pathIn, const WeightLoadOptions& options) {
    const std::string path = resolveCheckpointPath(pathIn);
    const SafetensorsContents contents = readSafetensors(path);
    auto metaIt = contents.metadata.find(kMetaKey);
    if (metaIt == contents.metadata.end())
        throw std::runtime_error(path + ": not a Strata checkpoint (no '" + std::string(kMetaKey) + "' metadata)");
    checkMetadataChecksum(path, contents.metadata, metaIt->second);
    Checkpoint c;
    try {
        const Json meta = parseJson<Json>(metaIt->second, path);
        c.project = projectFromJson(meta.at("project"));
        // Read wide, then range-checked: get<int>() would wrap an epoch of 2^40 silently.
        const int64_t epoch = meta.at("epoch").get<int64_t>();
        if (epoch < 0 || epoch > std::numeric_limits<int>::max())
            throw std::runtime_error(path + ": checkpoint metadata: epoch " + std::to_string(epoch) +
                                     " is out of range");
        c.epoch = static_cast<int>(epoch);
        c.step = meta.at("step").get<int64_t>();
        c.stepInEpoch = meta.value("step_in_epoch", int64_t{0});
        c.hasValidation = meta.at("has_validation").get<bool>();
        // Runs without validation store NaN metrics, which JSON writes as null.
        auto metric = [&meta](const char* key) {
            const Json& v = meta.at(key);
            return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
        };
        c.valLoss = metric("val_loss");
        c.valAccuracy = metric("val_accuracy");
        c.best = meta.value("best", false);
        c.normalization = normalizationFromJson(meta.at("normalization"));
        if (meta.contains("target_normalization"))
            c.targetNormalization = normalizationFromJson(meta.at("target_normalization"));
        c.classNames = meta.at("class_names").get<std::vector<std::string>>();
        c.vocabulary = meta.value("vocabulary", std::vector<std::string>{});
        try {
            c.tokenizerModel = base64Decode(meta.value("tokenizer_model", std::string()));
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error(path + ": checkpoint metadata 'tokenizer_model' is malformed: " + e.what());
        }
        c.trainerState = meta.value("trainer_state", Json::object());
    } catch (const ProjectError& e) {
        throw std::runtime_error(path + ": checkpoint project: " + e.what());
    } catch (const Json::exception& e) {
        throw std::runtime_error(path + ": checkpoint metadata is malformed: " + e.what());
    }
    checkCheckpointFields(path, c);
    const std::string prefix = kOptimPrefix, maskPrefix = kMaskPrefix;
    for (const TensorRecord& r : contents.tensors) {
        if (r.name.rfind(prefix, 0) == 0)
            c.optimizerState[r.name.substr(prefix.size())] = recordToFloats(r);
        else if (r.name.rfind(maskPrefix, 0) == 0)
            c.masks[r.name.substr(maskPrefix.size())] = recordToFloats(r);
        else
            c.weights[r.name] = recordToFloats(r);
    }
    for (const auto* group : {&c.weights, &c.optimizerState, &c.masks}) {
        const std::string prefix = group == &c.weights ? "" : group == &c.masks ? kMaskPrefix : kOptimPrefix;
        for (const auto& [name, values] : *group)
            if (std::string problem = nonFiniteProblem(prefix + name, values, options); !problem.empty())
                throw FormatError(path, problem);
    }
    return c;
}

}  // namespace strata

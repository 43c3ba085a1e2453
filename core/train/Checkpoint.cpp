#include "core/train/Checkpoint.h"

#include <filesystem>
#include <limits>
#include <stdexcept>

#include "core/data/Dataset.h"
#include "core/graph/Model.h"
#include "core/io/Safetensors.h"

namespace strata {

namespace fs = std::filesystem;

namespace {
constexpr const char* kMetaKey = "strata.checkpoint";
constexpr const char* kOptimPrefix = "optim.";
constexpr const char* kMaskPrefix = "mask.";
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
    meta["normalization"] = {{"mode", c.normalization.mode},
                             {"scale", c.normalization.scale},
                             {"mean", c.normalization.mean},
                             {"std", c.normalization.std},
                             {"feature_mean", c.normalization.featureMean},
                             {"feature_std", c.normalization.featureStd}};
    meta["class_names"] = c.classNames;
    meta["vocabulary"] = c.vocabulary;
    meta["trainer_state"] = c.trainerState;

    std::vector<TensorRecord> records;
    for (const auto& [name, values] : c.weights)
        records.push_back(makeF32Record(name, Shape{static_cast<int64_t>(values.size())}, values));
    for (const auto& [name, values] : c.optimizerState)
        records.push_back(makeF32Record(kOptimPrefix + name, Shape{static_cast<int64_t>(values.size())}, values));
    for (const auto& [name, values] : c.masks)
        records.push_back(makeF32Record(kMaskPrefix + name, Shape{static_cast<int64_t>(values.size())}, values));
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    writeSafetensors(path, records, {{kMetaKey, meta.dump()}});
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
    for (const auto& e : fs::directory_iterator(path, ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("epoch-", 0) == 0 && e.path().extension() == ".safetensors" && e.path().string() > latest)
            latest = e.path().string();
    }
    if (latest.empty()) throw std::runtime_error(path + ": the folder holds no checkpoint (*.safetensors)");
    return latest;
}

Checkpoint loadCheckpoint(const std::string& pathIn) {
    const std::string path = resolveCheckpointPath(pathIn);
    const SafetensorsContents contents = readSafetensors(path);
    auto metaIt = contents.metadata.find(kMetaKey);
    if (metaIt == contents.metadata.end())
        throw std::runtime_error(path + ": not a Strata checkpoint (no '" + std::string(kMetaKey) + "' metadata)");
    Checkpoint c;
    try {
        const Json meta = Json::parse(metaIt->second);
        c.project = projectFromJson(meta.at("project"));
        c.epoch = meta.at("epoch").get<int>();
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
        const Json& n = meta.at("normalization");
        c.normalization.mode = n.at("mode").get<std::string>();
        c.normalization.scale = n.at("scale").get<float>();
        c.normalization.mean = n.at("mean").get<float>();
        c.normalization.std = n.at("std").get<float>();
        c.normalization.featureMean = n.value("feature_mean", std::vector<float>{});
        c.normalization.featureStd = n.value("feature_std", std::vector<float>{});
        c.classNames = meta.at("class_names").get<std::vector<std::string>>();
        c.vocabulary = meta.value("vocabulary", std::vector<std::string>{});
        c.trainerState = meta.value("trainer_state", Json::object());
    } catch (const ProjectError& e) {
        throw std::runtime_error(path + ": checkpoint project: " + e.what());
    } catch (const Json::exception& e) {
        throw std::runtime_error(path + ": checkpoint metadata is malformed: " + e.what());
    }
    const std::string prefix = kOptimPrefix, maskPrefix = kMaskPrefix;
    for (const TensorRecord& r : contents.tensors) {
        if (r.name.rfind(prefix, 0) == 0)
            c.optimizerState[r.name.substr(prefix.size())] = recordToFloats(r);
        else if (r.name.rfind(maskPrefix, 0) == 0)
            c.masks[r.name.substr(maskPrefix.size())] = recordToFloats(r);
        else
            c.weights[r.name] = recordToFloats(r);
    }
    return c;
}

namespace {

void checkFeatureCount(const std::vector<float>& values, const CheckpointNormalization& n) {
    if (n.featureStd.size() != n.featureMean.size())
        throw std::invalid_argument("normalization: " + std::to_string(n.featureMean.size()) + " feature means but " +
                                    std::to_string(n.featureStd.size()) + " standard deviations");
    if (values.size() % n.featureMean.size() != 0)
        throw std::invalid_argument("normalization: " + std::to_string(values.size()) +
                                    " values are not whole samples of " + std::to_string(n.featureMean.size()) +
                                    " features");
}

}  // namespace

CheckpointNormalization checkpointNormalizationOf(const Normalization& n) {
    CheckpointNormalization c;
    c.mode = n.mode;
    c.scale = n.scale;
    c.mean = n.mean;
    c.std = n.std;
    c.featureMean = n.featureMean;
    c.featureStd = n.featureStd;
    return c;
}

void applyNormalization(std::vector<float>& values, const CheckpointNormalization& n) {
    if (n.mode == "none") return;
    if (!n.featureMean.empty()) {
        checkFeatureCount(values, n);
        const size_t f = n.featureMean.size();
        for (size_t i = 0; i < values.size(); ++i) values[i] = (values[i] - n.featureMean[i % f]) / n.featureStd[i % f];
        return;
    }
    // The same float expression as loadDataset, so both give identical inputs.
    const float inv = 1.0f / n.std;
    for (float& x : values) x = (x * n.scale - n.mean) * inv;
}

void undoNormalization(std::vector<float>& values, const CheckpointNormalization& n) {
    if (n.mode == "none") return;
    if (!n.featureMean.empty()) {
        checkFeatureCount(values, n);
        const size_t f = n.featureMean.size();
        for (size_t i = 0; i < values.size(); ++i) values[i] = values[i] * n.featureStd[i % f] + n.featureMean[i % f];
        return;
    }
    for (float& x : values) x = (x * n.std + n.mean) / n.scale;
}

}  // namespace strata

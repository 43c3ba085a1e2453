// ProjectFingerprint: what makes a checkpoint (or a saved model) belong to a project, so that a same-shaped
// checkpoint of another project is refused where it would otherwise load silently (resume, export and predict of
// a project), naming what differs.
//
// A project's fingerprint is its model and its data: the layers by name and type, their connections, every
// parameter's name and shape, the task (dataset kind and loss), the class names, the input normalization and the
// vocabulary. Not part of it: the project's name or id (a renamed or copied project keeps its checkpoints) and the
// training settings a resumed run may change (epochs, learning rate, optimizer, batch size, devices, augmentation).
// Normalization statistics match within a relative 1e-3, so that a data set that grew a little still resumes; a
// different data set's statistics, or mode, do not.
//
// To start from another project's weights on purpose, a new run copies the tensors whose name and shape match
// (initFromCheckpoint in Checkpoint.h, `strata-train --init-from`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/graph/Project.h"
#include "core/train/Checkpoint.h"

namespace strata {

struct ProjectFingerprint {
    std::vector<std::string> layers;          // "dense1 (Dense)", by name
    std::vector<std::string> connections;     // "dense1 -> relu1.in", sorted
    std::map<std::string, Shape> parameters;  // "<node>.<param>" -> shape; empty when the graph does not analyze
    std::string task;                         // "dataset idx, loss cross_entropy"
    // False for a fingerprint of a project's settings alone (its data not loaded): classNames are then the
    // class_names the project lists (empty: not known), the normalization only its mode, the vocabulary unknown.
    bool dataKnown = true;
    std::vector<std::string> classNames;
    Normalization normalization;
    std::vector<std::string> vocabulary;
};

// Every parameter of a graph that analyzes cleanly, "<node>.<param>" -> shape; empty when it does not.
std::map<std::string, Shape> graphParameterShapes(const Graph& graph);

// The fingerprint of a project trained on data with these classes, normalization and vocabulary (as a
// checkpoint stores them, or as loadDataset found them).
ProjectFingerprint projectFingerprint(const Project& project, const std::vector<std::string>& classNames,
                                      const Normalization& normalization, const std::vector<std::string>& vocabulary);
ProjectFingerprint checkpointFingerprint(const Checkpoint& checkpoint);
// From the project file alone (dataKnown false): for export and predict, which do not load the data set.
ProjectFingerprint projectSettingsFingerprint(const Project& project);

// What differs, one sentence each ("the checkpoint's classes are [a, b]; the project's are [c, d]"), comparing
// only what both sides know; empty when the saved model belongs to the project. `what` names the saved side
// ("checkpoint", "model file").
std::vector<std::string> fingerprintDifferences(const ProjectFingerprint& saved, const ProjectFingerprint& project,
                                                const std::string& what = "checkpoint");

// The checkpoint a project file stands for where a model is expected (export, predict): the best, else the latest,
// checkpoint of its checkpoint folder (relative to the project file), or without one of its newest run folder
// (RunFolder.h). Throws std::runtime_error naming the project when it has neither.
std::string projectCheckpointFile(const Project& project, const std::string& projectPath);

// Throws std::runtime_error when `saved` (from `file`, written by project `savedProjectName`) does not belong to
// the project: "<file>: this checkpoint was written for another project ('name'): <differences>. <advice>".
void checkBelongsToProject(const std::string& file, const std::string& savedProjectName,
                           const ProjectFingerprint& saved, const ProjectFingerprint& project,
                           const std::string& advice, const std::string& what = "checkpoint");

}  // namespace strata

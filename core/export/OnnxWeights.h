// The weights of an ONNX file as --init-from reads them (TrainerOptions::readModelWeights): its float
// initializers by name, which in a file Strata wrote are "<node>.<param>" (Onnx.h), so they match the
// parameters of a project with the same node names and shapes.
#pragma once

#include <string>

#include "core/train/Checkpoint.h"

namespace strata {

// Reads and checks the file (readOnnx); the graph's own constants (the normalization's "<input>/norm_...", an
// int8 file's "/scale" and "/zero_point", all with a '/') are not weights and are left out. A file another tool
// wrote (its producer is not "strata") is read through the importer (OnnxImport.h, partial), so its weights carry
// the node names of the project `strata-train import` makes of it. The source's noMatchHint says how to make a
// project that matches. Throws FormatError naming the file.
WeightSource onnxWeightSource(const std::string& path);

}  // namespace strata

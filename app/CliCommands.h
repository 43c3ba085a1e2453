// strata-train's commands, run in-process (the tests call them so): `args` are the arguments after the command
// word; results go to `out`, notes and errors to `err`. A command declared on the command line's tree
// (app/Cli.h) runs through strata::cli::runCommandLine, with the program's parsing, messages and exit statuses.
//
//   predict MODEL_FILE INPUT [--top K] [--count N] [--labels IDX_LABELS] [--quiet] [--runtime strata|opencv]
//          [--allow-non-finite]
//     MODEL_FILE: checkpoint file or folder, .safetensors / .gguf / .onnx export (core/infer/Predict.h says
//     which runtime runs an .onnx file), or a project file (its checkpoint folder's best checkpoint, refused
//     when it belongs to another project: core/train/ProjectFingerprint.h). INPUT: IDX images (gzipped or raw; the
//     first N), a CSV file (header row; the project's label column, when present, is shown and not fed to the model;
//     text projects tokenize the text column), or a PNG / PGM / PPM image, fitted to the model's input as the Predict
//     dock does (core/data/ImageFile.h: channels converted, size resized, each said in a line). Raw values are
//     normalized as in training; prints the top K classes with probabilities, and "accuracy X% on N
//     samples" when labels are known (the CSV's label column, or --labels with an IDX label file for IDX
//     images). --quiet prints only that summary.
//   prune PROJECT_OR_CHECKPOINT --sparsity S -o DIR [--structured] [--fine-tune-epochs N] [schedule options]
//     Magnitude pruning to sparsity S on a polynomial schedule while fine-tuning (or, --structured, removing
//     the fraction S of Conv2D filters and Dense units and fine-tuning the smaller graph); writes a project
//     file and its checkpoints into DIR and prints the validation accuracy before and after and each layer's
//     sparsity (core/train/PruneRun.h).
//   runs list | show ID | export ID --csv [-o FILE] | diff A B | rename ID NAME | note ID TEXT | delete ID
//        [--history DB]
//     The run history that the workbench and training runs of strata-train write (core/history/RunStore).
//   profile PROJECT [--device D] [--batch B] [--steps N] [--json FILE] [--roofline-cache FILE] [--refresh-roofline]
//     Per-layer forward and backward times, FLOPs, bytes, achieved rates against the device roofline, and the
//     step split into compute, data wait and overhead (core/train/Profile.h).
//   sweep PROJECT [--history DB|off] [--state FILE] [--quiet]
//     The project's hyperparameter sweep, each trial a recorded run, resumable (core/history/Sweep.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int runExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPruneCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runProfileCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runSweepCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runRunsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata

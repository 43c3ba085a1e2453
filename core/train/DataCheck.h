// DataCheck: the data set against the graph, before any training step. The samples' shape against the
// Input's, the class count against the output's size, and a text vocabulary against every Embedding's size
// (an Embedding smaller than the vocabulary used to fail only inside the first forward pass). Every mismatch
// is listed at once, each naming its node and both numbers, with the one parameter edit that fixes it when
// there is one. The Trainer refuses a run with the whole list; the workbench's Check shows it in the
// Problems panel with a button per fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/Dataset.h"
#include "core/graph/Graph.h"

namespace strata {

// What the check needs to know of a data set: a DatasetBundle without its samples.
struct DataFacts {
    Shape sampleShape;  // per sample: [1, 28, 28]; text: [max_tokens]
    int numClasses = 0;
    int64_t vocabularySize = 0;  // text: token ids run from 0 to vocabularySize - 1; 0 for other data
    int64_t trainCount = 0;      // training samples; 0 when not counted (readDataFacts of an image folder)
    // Tasks other than classification: the output must have the targets' shape (regression: [targets],
    // multi-label: [labels], image to image: the image's).
    TaskKind task = TaskKind::Classification;
    Shape targetShape;
};
DataFacts dataFactsOf(const DatasetBundle& data);
// The facts of the data `settings` describe, read as cheaply as they can be: a synthetic set from its settings,
// an image folder from its listing (no image decoded), the other kinds loaded (a text set is tokenized for its
// vocabulary). Throws DataError as loadDataset does.
DataFacts readDataFacts(const DatasetSettings& settings, const std::string& projectPath);

// The edit that fixes a mismatch: node `node`'s parameter `param` set to `value` (one undoable edit in the
// workbench).
struct DataFix {
    int node = -1;
    std::string param;
    Json value;
    std::string text;  // "set its units to 10"
    bool available() const { return node >= 0 && !param.empty(); }
};

struct DataMismatch {
    int node = -1;        // the node at fault; -1: the graph as a whole
    std::string message;  // "Input 'image' expects [784] but the data's samples are [1, 28, 28]"
    DataFix fix;          // not available() when no single parameter fixes it (the message says what to do)
};

// Every way the graph and the data disagree, in node order (Input, Embeddings, output); empty when they
// agree. Nodes whose shape the graph's own analysis cannot work out are left to that analysis.
std::vector<DataMismatch> checkDataAgainstGraph(const Graph& graph, const DataFacts& facts);

// The list as one error: "the data does not fit the graph (2 problems): Input 'image' expects [784] but
// ...: set its shape to [1, 28, 28]; ...".
std::string dataMismatchText(const std::vector<DataMismatch>& mismatches);

}  // namespace strata

// Templates: ready-made projects for File > New from template. Each is built
// in code through Graph::addNode/connect, with canvas positions laid out top
// to bottom and dataset/training settings that run as they are.
#pragma once

#include <QList>
#include <QString>
#include <functional>

#include "core/graph/Project.h"

namespace strata::ui {

struct ProjectTemplate {
    QString id;     // "fashion_cnn"
    QString title;  // "Fashion-MNIST CNN"
    QString description;
    std::function<strata::Project()> make;
};

QList<ProjectTemplate> projectTemplates();
// The template with this id; an empty Project when there is none.
strata::Project makeTemplate(const QString& id);

// Fashion-MNIST, 28x28 grey images, 10 classes.
strata::Project mlpTemplate();
strata::Project lenet5Template();
strata::Project fashionCnnTemplate();
// Conv stem, two residual blocks joined by Add, global average pooling, Dense 10.
strata::Project residualTemplate();
// Input [16] token ids -> Embedding -> SequenceMeanPool -> Dense -> ReLU -> Dense.
strata::Project textClassifierTemplate();
strata::Project textCnnTemplate();
// Input [128] word ids -> Embedding 128 -> PositionalEmbedding -> 2 Transformer encoder blocks (4 heads, masked by
// the ids) -> masked mean over the sequence -> Dropout -> Dense.
strata::Project textTransformerTemplate();
// Tasks beyond classification (core/graph/Task.h). Input [9] -> Dense 64 -> ReLU -> Dense 32 -> ReLU -> Dense 1:
// regression of a CSV's target column (set up for examples/data/auto_mpg, made by tools/make_auto_mpg_dataset.py).
strata::Project tabularRegressionTemplate();
// Input [64] word ids -> Embedding 64 -> SequenceMeanPool -> Dense 128 -> ReLU -> Dense 16: multi-label text,
// sigmoid and binary cross-entropy per label (set up for examples/data/debian_tags).
strata::Project multiLabelTextTemplate();
// A convolutional denoising autoencoder on Fashion-MNIST: the input gets Gaussian and masking noise on the fly, the
// target is the clean image; stride-1 convolutions 1 -> 32 -> 32 -> 1 (3x3, padded), MSE, PSNR.
strata::Project denoisingAutoencoderTemplate();

// Blocks: groups of wired layers that the palette's "Blocks" group drops onto the canvas as one edit.
struct BlockTemplate {
    QString id;  // "transformer_encoder"
    QString title;
    QString description;
};
QList<BlockTemplate> blockTemplates();
const BlockTemplate* findBlockTemplate(const QString& id);

// The nodes one block added to a graph.
struct AddedBlock {
    std::vector<int> nodes;  // every node of the block, in order
    int output = -1;         // the node whose output leaves the block
};
// Adds block `id` to `g` with its top-left node at (x, y); node names start with `prefix` ("block1_").
// from >= 0: the node feeding the block (connected); width: the sequence width it works on; mask >= 0: the
// token-id node for the attention's padding mask (masked attention), else unmasked. Unknown id: nothing added.
AddedBlock addBlock(strata::Graph& g, const QString& id, const std::string& prefix, double x, double y, int from,
                    int width, int mask);

}  // namespace strata::ui

// Templates: ready-made projects built in code.
#include "ui/base/Templates.h"

#include <QObject>

namespace strata::ui {

namespace {

constexpr double kRow = 110.0;
constexpr double kColumn = 240.0;

// Adds nodes one row lower each time; positions match ProjectDocument::autoLayout's grid.
class Builder {
public:
    explicit Builder(strata::Graph& g) : m_g(g) {}
    int add(const std::string& type, const std::string& name, strata::Json params = strata::Json::object(),
            double column = 0) {
        return m_g.addNode(type, name, params, column * kColumn, kRow * m_row++);
    }
    // Adds a node fed by `from`.
    int chain(int from, const std::string& type, const std::string& name, strata::Json params = strata::Json::object(),
              double column = 0) {
        const int id = add(type, name, std::move(params), column);
        m_g.connect(from, id);
        return id;
    }

private:
    strata::Graph& m_g;
    int m_row = 0;
};

strata::DatasetSettings fashionMnist() {
    strata::DatasetSettings d;
    d.kind = strata::DatasetKind::Idx;
    const std::string dir = "/usr/share/datasets/fashion-mnist/";
    d.trainImages = dir + "train-images-idx3-ubyte.gz";
    d.trainLabels = dir + "train-labels-idx1-ubyte.gz";
    d.validationImages = dir + "t10k-images-idx3-ubyte.gz";
    d.validationLabels = dir + "t10k-labels-idx1-ubyte.gz";
    d.normalization = strata::NormalizationMode::Scale;
    d.classNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    return d;
}

strata::TrainingSettings sgd(int epochs) {
    strata::TrainingSettings t;
    t.optimizer = strata::OptimizerKind::Sgd;
    t.learningRate = 0.01;
    t.momentum = 0.9;
    t.epochs = epochs;
    t.batchSize = 64;
    return t;
}

strata::Json conv(int filters, int kernel, int padding) {
    return {{"filters", filters}, {"kernel", {kernel, kernel}}, {"stride", {1, 1}}, {"padding", {padding, padding}}};
}

// A strided convolution (stride 2 halves the image) and a transposed one that doubles it back (kernel 2, stride 2).
strata::Json convStride(int filters, int kernel, int stride, int padding) {
    return {{"filters", filters},
            {"kernel", {kernel, kernel}},
            {"stride", {stride, stride}},
            {"padding", {padding, padding}}};
}

strata::Json upConv(int filters) { return {{"filters", filters}, {"kernel", {2, 2}}, {"stride", {2, 2}}}; }

strata::Json pool2() { return {{"kernel", {2, 2}}, {"stride", {2, 2}}}; }

strata::Json dense(int units) { return {{"units", units}}; }

strata::Json imageInput() { return {{"shape", {1, 28, 28}}}; }

}  // namespace

strata::Project mlpTemplate() {
    strata::Project p;
    p.name = "Fashion-MNIST MLP";
    Builder b(p.graph);
    int n = b.add("Input", "image", imageInput());
    n = b.chain(n, "Flatten", "flatten");
    n = b.chain(n, "Dense", "fc1", dense(256));
    n = b.chain(n, "ReLU", "relu1");
    b.chain(n, "Dense", "logits", dense(10));
    p.dataset = fashionMnist();
    p.training = sgd(3);
    return p;
}

strata::Project lenet5Template() {
    strata::Project p;
    p.name = "LeNet-5";
    Builder b(p.graph);
    int n = b.add("Input", "image", imageInput());
    n = b.chain(n, "Conv2D", "c1", conv(6, 5, 2));
    n = b.chain(n, "Tanh", "tanh1");
    n = b.chain(n, "AvgPool2D", "s2", pool2());
    n = b.chain(n, "Conv2D", "c3", conv(16, 5, 0));
    n = b.chain(n, "Tanh", "tanh2");
    n = b.chain(n, "AvgPool2D", "s4", pool2());
    n = b.chain(n, "Flatten", "flatten");
    n = b.chain(n, "Dense", "f5", dense(120));
    n = b.chain(n, "Tanh", "tanh3");
    n = b.chain(n, "Dense", "f6", dense(84));
    n = b.chain(n, "Tanh", "tanh4");
    b.chain(n, "Dense", "logits", dense(10));
    p.dataset = fashionMnist();
    p.training = sgd(3);
    return p;
}

strata::Project fashionCnnTemplate() {
    strata::Project p;
    p.name = "Fashion-MNIST CNN";
    Builder b(p.graph);
    int n = b.add("Input", "image", imageInput());
    n = b.chain(n, "Conv2D", "conv1", conv(32, 3, 1));
    n = b.chain(n, "ReLU", "relu1");
    n = b.chain(n, "MaxPool2D", "pool1", pool2());
    n = b.chain(n, "Conv2D", "conv2", conv(64, 3, 1));
    n = b.chain(n, "ReLU", "relu2");
    n = b.chain(n, "MaxPool2D", "pool2", pool2());
    n = b.chain(n, "Flatten", "flatten");
    n = b.chain(n, "Dense", "fc1", dense(128));
    n = b.chain(n, "ReLU", "relu3");
    b.chain(n, "Dense", "logits", dense(10));
    p.dataset = fashionMnist();
    p.training = sgd(3);
    return p;
}

strata::Project residualTemplate() {
    strata::Project p;
    p.name = "Small residual net";
    strata::Graph& g = p.graph;
    Builder b(g);
    int n = b.add("Input", "image", imageInput());
    n = b.chain(n, "Conv2D", "stem", conv(16, 3, 1));
    n = b.chain(n, "ReLU", "stem_relu");
    for (int block = 1; block <= 2; ++block) {
        const std::string k = std::to_string(block);
        const int skip = n;
        // The main path steps right so the skip edge runs straight down beside it.
        int m = b.chain(n, "Conv2D", "block" + k + "_conv1", conv(16, 3, 1), 0.5);
        m = b.chain(m, "ReLU", "block" + k + "_relu1", strata::Json::object(), 0.5);
        m = b.chain(m, "Conv2D", "block" + k + "_conv2", conv(16, 3, 1), 0.5);
        const int add = b.add("Add", "block" + k + "_add", {{"inputs", 2}});
        g.connect(m, add, "in0");
        g.connect(skip, add, "in1");
        n = b.chain(add, "ReLU", "block" + k + "_out");
    }
    n = b.chain(n, "GlobalAvgPool", "gap");
    b.chain(n, "Dense", "logits", dense(10));
    p.dataset = fashionMnist();
    p.training = sgd(3);
    return p;
}

strata::Project textClassifierTemplate() {
    strata::Project p;
    p.name = "Text classifier";
    Builder b(p.graph);
    int n = b.add("Input", "tokens", {{"shape", {16}}});
    n = b.chain(n, "Embedding", "embed", {{"vocab", 20000}, {"dim", 32}});
    n = b.chain(n, "SequenceMeanPool", "mean");
    n = b.chain(n, "Dense", "fc1", dense(64));
    n = b.chain(n, "ReLU", "relu1");
    b.chain(n, "Dense", "logits", dense(4));
    p.dataset.kind = strata::DatasetKind::Text;
    p.dataset.tokenizer = strata::Tokenizer::Word;
    p.dataset.maxTokens = 16;
    p.dataset.maxVocab = 20000;
    p.dataset.validationSplit = 0.1;
    p.training = sgd(5);
    p.training.optimizer = strata::OptimizerKind::Adam;
    p.training.learningRate = 0.001;
    return p;
}

// A text CNN (Kim 2014, with mean instead of max pooling over time): word embeddings, 3-word filters,
// pooled over the sequence.
strata::Project textCnnTemplate() {
    strata::Project p = textClassifierTemplate();
    p.name = "Text CNN";
    p.graph = strata::Graph();
    Builder b(p.graph);
    int n = b.add("Input", "tokens", {{"shape", {64}}});
    n = b.chain(n, "Embedding", "embed", {{"vocab", 20000}, {"dim", 64}});
    n = b.chain(n, "Conv1D", "trigrams", {{"filters", 128}, {"kernel", 3}, {"padding", 1}});
    n = b.chain(n, "ReLU", "relu1");
    n = b.chain(n, "SequenceMeanPool", "mean");
    n = b.chain(n, "Dropout", "dropout", {{"rate", 0.3}});
    b.chain(n, "Dense", "logits", dense(4));
    p.dataset.maxTokens = 64;
    p.training.learningRate = 0.002;
    return p;
}

// A post-LayerNorm Transformer encoder block (Vaswani et al. 2017): self-attention, Add, LayerNorm, Dense 2W ->
// GELU -> Dense W, Add, LayerNorm. One node per row below (x, y).
AddedBlock addTransformerEncoderBlock(strata::Graph& g, const std::string& prefix, double x, double y, int from,
                                      int width, int mask) {
    AddedBlock b;
    int row = 0;
    auto add = [&](const std::string& type, const std::string& name, strata::Json params) {
        const int id = g.addNode(type, prefix + name, std::move(params), x, y + kRow * row++);
        b.nodes.push_back(id);
        return id;
    };
    const bool masked = mask >= 0;
    const int attention =
        add("MultiHeadSelfAttention", "attention",
            {{"heads", width % 4 == 0 ? 4 : 1}, {"dropout", 0.0}, {"masked", masked}, {"use_bias", true}});
    const int add1 = add("Add", "residual1", {{"inputs", 2}});
    const int norm1 = add("LayerNorm", "norm1", {{"eps", 1e-5}});
    const int ff1 = add("Dense", "ff1", {{"units", 2 * width}});
    const int gelu = add("GELU", "gelu", strata::Json::object());
    const int ff2 = add("Dense", "ff2", {{"units", width}});
    const int add2 = add("Add", "residual2", {{"inputs", 2}});
    const int norm2 = add("LayerNorm", "norm2", {{"eps", 1e-5}});
    if (from >= 0) {
        g.connect({from, "out"}, {attention, "in"});
        g.connect({from, "out"}, {add1, "in0"});
    }
    if (masked) g.connect({mask, "out"}, {attention, "mask"});
    g.connect({attention, "out"}, {add1, "in1"});
    g.connect(add1, norm1);
    g.connect(norm1, ff1);
    g.connect(ff1, gelu);
    g.connect(gelu, ff2);
    g.connect({norm1, "out"}, {add2, "in0"});
    g.connect({ff2, "out"}, {add2, "in1"});
    g.connect(add2, norm2);
    b.output = norm2;
    return b;
}

QList<BlockTemplate> blockTemplates() {
    return {{QStringLiteral("transformer_encoder"), QObject::tr("Transformer encoder block"),
             QObject::tr("Self-attention (4 heads, padding masked by the token ids), Add, LayerNorm, Dense 2W -> "
                         "GELU -> Dense W, Add, LayerNorm. Select the layer that feeds it before adding it.")}};
}

const BlockTemplate* findBlockTemplate(const QString& id) {
    static const QList<BlockTemplate> blocks = blockTemplates();
    for (const BlockTemplate& b : blocks)
        if (b.id == id) return &b;
    return nullptr;
}

AddedBlock addBlock(strata::Graph& g, const QString& id, const std::string& prefix, double x, double y, int from,
                    int width, int mask) {
    if (id == QStringLiteral("transformer_encoder"))
        return addTransformerEncoderBlock(g, prefix, x, y, from, width, mask);
    return {};
}

// A small Transformer encoder for text: learned positions, two encoder blocks, the mean of the real tokens.
strata::Project textTransformerTemplate() {
    strata::Project p = textClassifierTemplate();
    p.name = "Text Transformer";
    p.graph = strata::Graph();
    strata::Graph& g = p.graph;
    constexpr int kWidth = 128;
    // The ids one column to the left: their edges to the masks then run beside the chain, not through it.
    const int tokens = g.addNode("Input", "tokens", {{"shape", {128}}}, -kColumn, 0);
    const int embed = g.addNode("Embedding", "embed", {{"vocab", 20000}, {"dim", kWidth}}, 0, kRow);
    g.connect(tokens, embed);
    const int positions = g.addNode("PositionalEmbedding", "positions", strata::Json::object(), 0, 2 * kRow);
    g.connect(embed, positions);
    const AddedBlock first = addTransformerEncoderBlock(g, "block1_", 0, 3 * kRow, positions, kWidth, tokens);
    const AddedBlock second = addTransformerEncoderBlock(g, "block2_", 0, 11 * kRow, first.output, kWidth, tokens);
    const int mean = g.addNode("SequenceMeanPool", "mean", {{"masked", true}}, 0, 19 * kRow);
    g.connect({second.output, "out"}, {mean, "in"});
    g.connect({tokens, "out"}, {mean, "mask"});
    const int dropout = g.addNode("Dropout", "dropout", {{"rate", 0.1}}, 0, 20 * kRow);
    g.connect(mean, dropout);
    const int logits = g.addNode("Dense", "logits", dense(4), 0, 21 * kRow);
    g.connect(dropout, logits);
    p.dataset.maxTokens = 128;
    p.training.optimizer = strata::OptimizerKind::AdamW;
    p.training.learningRate = 0.0005;
    p.training.weightDecay = 0.01;
    return p;
}

strata::Project tabularRegressionTemplate() {
    strata::Project p;
    p.name = "Tabular regression";
    Builder b(p.graph);
    int n = b.add("Input", "features", {{"shape", {9}}});
    n = b.chain(n, "Dense", "fc1", dense(64));
    n = b.chain(n, "ReLU", "relu1");
    n = b.chain(n, "Dense", "fc2", dense(32));
    n = b.chain(n, "ReLU", "relu2");
    b.chain(n, "Dense", "value", dense(1));
    p.dataset.task = strata::TaskKind::Regression;
    p.dataset.kind = strata::DatasetKind::Csv;
    p.dataset.trainPath = "data/auto_mpg/train.csv";
    p.dataset.validationPath = "data/auto_mpg/validation.csv";
    p.dataset.targetColumns = {"mpg"};
    p.dataset.normalization = strata::NormalizationMode::Standardize;
    p.training = sgd(60);
    p.training.optimizer = strata::OptimizerKind::Adam;
    p.training.learningRate = 0.003;
    p.training.batchSize = 32;
    p.training.loss = strata::LossKind::Mse;
    return p;
}

strata::Project multiLabelTextTemplate() {
    strata::Project p;
    p.name = "Multi-label text";
    Builder b(p.graph);
    int n = b.add("Input", "tokens", {{"shape", {64}}});
    n = b.chain(n, "Embedding", "embed", {{"vocab", 20000}, {"dim", 64}});
    n = b.chain(n, "SequenceMeanPool", "mean");
    n = b.chain(n, "Dense", "fc1", dense(128));
    n = b.chain(n, "ReLU", "relu1");
    b.chain(n, "Dense", "labels", dense(16));
    p.dataset.task = strata::TaskKind::MultiLabel;
    p.dataset.kind = strata::DatasetKind::Text;
    p.dataset.trainPath = "data/debian_tags/train.csv";
    p.dataset.validationPath = "data/debian_tags/validation.csv";
    p.dataset.labelColumn = "tags";
    p.dataset.labelSeparator = ";";
    p.dataset.tokenizer = strata::Tokenizer::Word;
    p.dataset.maxTokens = 64;
    p.dataset.maxVocab = 20000;
    p.dataset.normalization = strata::NormalizationMode::None;
    p.training = sgd(4);
    p.training.optimizer = strata::OptimizerKind::Adam;
    p.training.learningRate = 0.01;
    p.training.loss = strata::LossKind::BceLogits;
    return p;
}

strata::Project denoisingAutoencoderTemplate() {
    strata::Project p;
    p.name = "Denoising autoencoder";
    Builder b(p.graph);
    int n = b.add("Input", "image", imageInput());
    // An encoder-decoder: two stride-2 convolutions down to 64 x 7 x 7 (a quarter of the input's pixels per
    // channel, so the net must summarize rather than copy), two transposed convolutions back up to 28 x 28.
    n = b.chain(n, "Conv2D", "enc1", convStride(32, 3, 2, 1));
    n = b.chain(n, "ReLU", "relu1");
    n = b.chain(n, "Conv2D", "enc2", convStride(64, 3, 2, 1));
    n = b.chain(n, "ReLU", "relu2");
    n = b.chain(n, "ConvTranspose2D", "dec1", upConv(32));
    n = b.chain(n, "ReLU", "relu3");
    n = b.chain(n, "ConvTranspose2D", "dec2", upConv(32));
    n = b.chain(n, "ReLU", "relu4");
    b.chain(n, "Conv2D", "decode", conv(1, 3, 1));
    p.dataset = fashionMnist();
    p.dataset.task = strata::TaskKind::ImageToImage;
    p.dataset.imageTarget = strata::ImageTarget::Denoise;
    p.dataset.noiseStd = 0.3f;
    p.dataset.maskingFraction = 0.1;
    p.training = sgd(3);
    p.training.optimizer = strata::OptimizerKind::Adam;
    p.training.learningRate = 0.002;
    p.training.loss = strata::LossKind::Mse;
    return p;
}

QList<ProjectTemplate> projectTemplates() {
    return {
        {QStringLiteral("fashion_cnn"), QObject::tr("Fashion-MNIST CNN"),
         QObject::tr("Two convolution blocks (32 and 64 filters, 3x3, max pooling) and a 128-unit classifier "
                     "for Fashion-MNIST. About 88% validation accuracy after 3 epochs."),
         fashionCnnTemplate},
        {QStringLiteral("mlp"), QObject::tr("MLP"),
         QObject::tr("Flatten, one hidden Dense layer of 256 units with ReLU, and 10 outputs: the simplest "
                     "image classifier."),
         mlpTemplate},
        {QStringLiteral("lenet5"), QObject::tr("LeNet-5"),
         QObject::tr("LeCun's classic: two 5x5 convolutions with tanh and average pooling, then 120-84-10 "
                     "dense layers."),
         lenet5Template},
        {QStringLiteral("resnet"), QObject::tr("Small residual net"),
         QObject::tr("A convolution stem, two residual blocks whose skip connections join through Add, global "
                     "average pooling and a Dense 10 classifier."),
         residualTemplate},
        {QStringLiteral("text"), QObject::tr("Text classifier"),
         QObject::tr("16 token ids -> Embedding -> mean over the sequence -> Dense -> ReLU -> Dense. Choose a "
                     "text CSV in the dataset panel."),
         textClassifierTemplate},
        {QStringLiteral("text_cnn"), QObject::tr("Text CNN"),
         QObject::tr("64 word ids -> Embedding -> Conv1D 128 over 3 words -> ReLU -> mean over the sequence -> "
                     "Dropout -> Dense: n-gram detectors. 86% on examples/debian_sections_cnn.strata's corpus."),
         textCnnTemplate},
        {QStringLiteral("text_transformer"), QObject::tr("Text Transformer"),
         QObject::tr("128 word ids -> Embedding 128 + learned positions -> two Transformer encoder blocks (4 heads, "
                     "padding masked) -> mean of the real tokens -> Dense. Choose a text CSV in the dataset panel."),
         textTransformerTemplate},
        {QStringLiteral("tabular_regression"), QObject::tr("Tabular regression"),
         QObject::tr("9 numeric columns -> Dense 64 -> Dense 32 -> one value: predicts a CSV column (MSE on the "
                     "standardized target; MAE, RMSE and R\u00b2 in its units). Set up for the Auto MPG cars "
                     "(tools/make_auto_mpg_dataset.py)."),
         tabularRegressionTemplate},
        {QStringLiteral("multi_label_text"), QObject::tr("Multi-label text"),
         QObject::tr("64 word ids -> Embedding -> mean -> Dense 128 -> 16 labels, a sigmoid each: several tags per "
                     "text (F1 at a threshold). Set up for Debian packages' tags (tools/make_debian_tags_dataset.py)."),
         multiLabelTextTemplate},
        {QStringLiteral("denoising_autoencoder"), QObject::tr("Denoising autoencoder"),
         QObject::tr("Fashion-MNIST images with Gaussian and masking noise in, the clean images out: an "
                     "encoder-decoder (two stride-2 convolutions down to 7x7, two transposed convolutions back up), "
                     "MSE, PSNR; the dashboard shows input, output and target each epoch."),
         denoisingAutoencoderTemplate},
    };
}

strata::Project makeTemplate(const QString& id) {
    for (const ProjectTemplate& t : projectTemplates())
        if (t.id == id) return t.make();
    return {};
}

}  // namespace strata::ui

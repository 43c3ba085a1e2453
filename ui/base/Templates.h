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

}  // namespace strata::ui

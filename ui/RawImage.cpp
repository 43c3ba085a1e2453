// RawImage: see RawImage.h.
#include "ui/RawImage.h"

#include <algorithm>
#include <cmath>

namespace strata::ui {

bool imageDims(const Shape& s, int& c, int& h, int& w) {
    if (s.rank() == 3 && (s[0] == 1 || s[0] == 3)) {
        c = int(s[0]);
        h = int(s[1]);
        w = int(s[2]);
        return true;
    }
    if (s.rank() == 2) {
        c = 1;
        h = int(s[0]);
        w = int(s[1]);
        return true;
    }
    return false;
}

QImage rawToImage(const float* x, const Shape& shape) {
    int c = 0, h = 0, w = 0;
    if (!imageDims(shape, c, h, w)) return {};
    QImage image(w, h, QImage::Format_RGB32);
    const int64_t plane = int64_t(h) * w;
    auto level = [](float v) { return std::clamp(int(std::lround(v)), 0, 255); };
    for (int r = 0; r < h; ++r) {
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(r));
        for (int k = 0; k < w; ++k) {
            const int64_t i = int64_t(r) * w + k;
            if (c == 3)
                line[k] = qRgb(level(x[i]), level(x[plane + i]), level(x[2 * plane + i]));
            else
                line[k] = qRgb(level(x[i]), level(x[i]), level(x[i]));
        }
    }
    return image;
}

}  // namespace strata::ui

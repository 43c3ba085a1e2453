// ResidentData: whether a run keeps its training split in backend memory (see BatchStager).
#pragma once

namespace strata {

// Training data held in backend memory: each batch is gathered there by index (Backend::gatherRows) instead
// of being cut on the host and uploaded, so host memory bandwidth cannot hold back a fast GPU. Auto: on a
// device other than the CPU (where the loader's worker thread already overlaps the step), when the split
// has no augmentation and fits in the byte limit. On: wherever possible (tests); Off: never.
enum class ResidentData { Auto, On, Off };

}  // namespace strata

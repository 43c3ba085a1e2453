// An empty translation unit: the strata_linkcheck_<folder> shared objects (core/CMakeLists.txt) consist of one
// core library linked whole, and need a source file of their own to exist.
namespace strata::linkcheck {
void anchor() {}
}  // namespace strata::linkcheck

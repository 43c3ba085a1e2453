#include "core/train/GradientBuckets.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "core/graph/Model.h"

namespace strata {
namespace {

// The model's packed gradient block, or null when nothing is trainable. It is in the backend's memory:
// host memory on the CPU; a GPU's needs a communicator that takes device memory (NCCL).
float* gradientBlock(const Communicator& comm, const Model& model) {
    const Tensor& g = model.packedGradients();
    if (!g.defined()) return nullptr;
    if (!model.backend().device().isCpu() && !comm.acceptsDeviceMemory())
        throw std::invalid_argument("data-parallel training over " + comm.name() + " sums host memory only; " +
                                    model.backend().device().toString() + " needs a device communicator (NCCL)");
    return g.f32();
}

}  // namespace

GradientBuckets::GradientBuckets(Communicator& comm, Model& model, int64_t bucketBytes) : m_comm(comm) {
    if (bucketBytes < 1) throw std::invalid_argument("the gradient bucket size must be at least 1 byte");
    m_grads = gradientBlock(comm, model);
    if (!m_grads) return;  // nothing trainable
    const Tensor& g = model.packedGradients();
    // Parameter starts, ascending; a bucket boundary is always one of them.
    std::vector<int64_t> starts;
    for (const auto& np : model.namedParameters())
        if (np.param->trainable && np.param->grad.defined()) starts.push_back(model.packedOffset(*np.param));
    std::sort(starts.begin(), starts.end());
    const int64_t elements = std::max<int64_t>(1, bucketBytes / static_cast<int64_t>(sizeof(float)));
    // From the end: a bucket takes parameters while it stays within the size (a larger parameter alone).
    int64_t hi = g.numel(), lo = hi;
    for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
        if (lo < hi && hi - *it > elements) {
            m_buckets.push_back(Bucket{lo, hi, nullptr, false});
            hi = lo;
        }
        lo = *it;
    }
    m_buckets.push_back(Bucket{0, hi, nullptr, false});
}

GradientBuckets::~GradientBuckets() = default;

std::pair<int64_t, int64_t> GradientBuckets::bucketRange(int i) const {
    const Bucket& b = m_buckets.at(static_cast<size_t>(i));
    return {b.lo, b.hi};
}

void GradientBuckets::beginStep() {
    m_next = 0;
    for (Bucket& b : m_buckets) {
        b.request.reset();
        b.complete = false;
    }
}

void GradientBuckets::start(Bucket& b) {
    if (m_next == 0) m_firstStart = Clock::now();
    b.request = m_comm.iallReduce(m_grads + b.lo, b.hi - b.lo, ReduceOp::Sum);
    ++m_next;
}

void GradientBuckets::testOutstanding() {
    for (size_t i = 0; i < m_next; ++i) {
        Bucket& b = m_buckets[i];
        if (!b.complete && b.request->test()) {
            b.complete = true;
            m_lastDone = Clock::now();
        }
    }
}

void GradientBuckets::ready(int64_t from) {
    testOutstanding();
    while (m_next < m_buckets.size() && m_buckets[m_next].lo >= from) start(m_buckets[m_next]);
}

void GradientBuckets::finish() {
    m_comm.setActivity("the gradient all-reduce");
    while (m_next < m_buckets.size()) start(m_buckets[m_next]);
    testOutstanding();
    const Clock::time_point waitStart = Clock::now();
    bool waited = false;
    for (Bucket& b : m_buckets) {
        if (b.complete) continue;
        b.request->wait();
        b.complete = true;
        waited = true;
    }
    const Clock::time_point end = Clock::now();
    if (waited) m_lastDone = end;
    m_last.exposedSeconds = waited ? std::chrono::duration<double>(end - waitStart).count() : 0.0;
    m_last.windowSeconds = m_buckets.empty() ? 0.0 : std::chrono::duration<double>(m_lastDone - m_firstStart).count();
}

AsyncGradients::AsyncGradients(Communicator& comm, Model& model) : m_comm(comm), m_backend(model.backend()) {
    m_grads = gradientBlock(comm, model);
    if (!m_grads) return;
    m_count = model.packedGradients().numel();
    if (m_backend.device().isCpu()) {
        m_hostBuffer.resize(static_cast<size_t>(m_count));
        m_buffer = m_hostBuffer.data();
    } else {
        // In the device's memory, beside the block; the swap goes through a third buffer.
        m_deviceBuffer = m_backend.empty({m_count});
        m_deviceSwap = m_backend.empty({m_count});
        m_buffer = m_deviceBuffer.f32();
    }
}

void AsyncGradients::copy(float* dst, const float* src) {
    const size_t bytes = static_cast<size_t>(m_count) * sizeof(float);
    if (m_backend.device().isCpu())
        std::memcpy(dst, src, bytes);
    else
        m_backend.copy(dst, src, bytes);
}

AsyncGradients::~AsyncGradients() = default;

void AsyncGradients::progress() {
    if (m_request && !m_seenDone && m_request->test()) {
        m_seenDone = true;
        m_done = Clock::now();
    }
}

// Waits for the sum in flight (timing the wait); m_buffer then holds it.
void AsyncGradients::complete() {
    progress();
    const Clock::time_point waitStart = Clock::now();
    const bool waited = !m_seenDone;
    if (waited) {
        m_comm.setActivity("the async gradient exchange");
        m_request->wait();
        m_done = Clock::now();
    }
    m_last.exposedSeconds = waited ? std::chrono::duration<double>(m_done - waitStart).count() : 0.0;
    m_last.windowSeconds = std::chrono::duration<double>(m_done - m_start).count();
    m_request.reset();
    m_previousLr = m_lr;
}

bool AsyncGradients::exchange(double learningRate) {
    if (!m_grads) return false;
    const bool had = m_request != nullptr;
    if (had) {
        complete();
        // The block takes the summed previous gradients; the buffer takes this step's local ones.
        if (m_backend.device().isCpu()) {
            std::swap_ranges(m_buffer, m_buffer + m_count, m_grads);
        } else {
            float* swap = m_deviceSwap.f32();
            copy(swap, m_grads);
            copy(m_grads, m_buffer);
            copy(m_buffer, swap);
        }
    } else {
        copy(m_buffer, m_grads);
        m_last = {};
    }
    m_lr = learningRate;
    m_start = Clock::now();
    m_seenDone = false;
    m_request = m_comm.iallReduce(m_buffer, m_count, ReduceOp::Sum);
    return had;
}

bool AsyncGradients::drain() {
    if (!m_request) return false;
    complete();
    copy(m_grads, m_buffer);
    return true;
}

}  // namespace strata

// Agreement: see Agreement.h.
#include "core/dist/Agreement.h"

#include <cstdint>
#include <map>

namespace strata {
namespace {

// Entries as one text: key, unit separator, value, record separator (neither occurs in JSON text or in the
// options' values; a path holding one would at worst be cut in the message, never compared wrongly, since
// the hash covers the bytes).
std::string serialize(const AgreementField& f) {
    std::string s;
    for (const auto& [key, value] : f.entries) s += key + '\x1f' + value + '\x1e';
    return s;
}

std::vector<std::pair<std::string, std::string>> deserialize(const std::string& s) {
    std::vector<std::pair<std::string, std::string>> out;
    size_t at = 0;
    while (at < s.size()) {
        const size_t end = s.find('\x1e', at);
        const std::string record = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
        const size_t sep = record.find('\x1f');
        if (sep == std::string::npos)
            out.emplace_back(record, std::string());
        else
            out.emplace_back(record.substr(0, sep), record.substr(sep + 1));
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return out;
}

std::string shown(const std::string& value) {
    constexpr size_t kMax = 160;
    if (value.size() <= kMax) return value;
    return value.substr(0, kMax) + "... (" + std::to_string(value.size()) + " characters)";
}

std::string list(const std::vector<int>& ranks) {
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i)
        s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    return s;
}

// The first entry in which `theirs` differs from `ours` (rank 0's), in rank 0's order, then theirs'.
void firstDifference(const std::vector<std::pair<std::string, std::string>>& ours,
                     const std::vector<std::pair<std::string, std::string>>& theirs, std::string& key,
                     std::string& ourValue, std::string& theirValue) {
    std::map<std::string, const std::string*> byKey;
    for (const auto& [k, v] : theirs) byKey.emplace(k, &v);
    for (const auto& [k, v] : ours) {
        const auto it = byKey.find(k);
        if (it == byKey.end() || *it->second != v) {
            key = k;
            ourValue = v;
            theirValue = it == byKey.end() ? "(absent)" : *it->second;
            return;
        }
    }
    std::map<std::string, bool> known;
    for (const auto& [k, v] : ours) known[k] = true;
    for (const auto& [k, v] : theirs)
        if (!known.count(k)) {
            key = k;
            ourValue = "(absent)";
            theirValue = v;
            return;
        }
    key.clear();  // equal entries, another order
    ourValue = theirValue = "the same entries in another order";
}

}  // namespace

std::string compareAcrossRanks(Communicator& comm, const std::vector<AgreementField>& fields) {
    const int ranks = comm.size(), rank = comm.rank();
    const std::string of = " of " + std::to_string(ranks);
    // Every rank's number of fields, so that the hashes below are one all-reduce of one size.
    std::vector<double> counts(static_cast<size_t>(ranks), 0.0);
    counts[static_cast<size_t>(rank)] = static_cast<double>(fields.size());
    comm.allReduce(counts.data(), ranks, ReduceOp::Sum);
    for (int r = 1; r < ranks; ++r)
        if (counts[static_cast<size_t>(r)] != counts[0])
            return "rank " + std::to_string(r) + of + " compares " +
                   std::to_string(static_cast<int64_t>(counts[static_cast<size_t>(r)])) +
                   " settings at the start, rank 0 " + std::to_string(static_cast<int64_t>(counts[0])) +
                   ": the ranks run different builds of strata-train; run the same one everywhere";

    // One hash per field and rank, as two 32-bit halves (exact in a double; one rank writes each slot).
    const size_t n = fields.size();
    std::vector<double> hashes(static_cast<size_t>(ranks) * n * 2, 0.0);
    for (size_t f = 0; f < n; ++f) {
        const std::string text = serialize(fields[f]);
        const uint64_t h = fnv1a64(text.data(), text.size());
        const size_t slot = (static_cast<size_t>(rank) * n + f) * 2;
        hashes[slot] = static_cast<double>(h >> 32);
        hashes[slot + 1] = static_cast<double>(h & 0xffffffffu);
    }
    comm.allReduce(hashes.data(), static_cast<int64_t>(hashes.size()), ReduceOp::Sum);
    auto same = [&](int r, size_t f) {
        const size_t a = f * 2, b = (static_cast<size_t>(r) * n + f) * 2;
        return hashes[a] == hashes[b] && hashes[a + 1] == hashes[b + 1];
    };
    for (size_t f = 0; f < n; ++f) {
        std::vector<int> differ;
        for (int r = 1; r < ranks; ++r)
            if (!same(r, f)) differ.push_back(r);
        if (differ.empty()) continue;
        // Every rank took the same branch (the hashes are every rank's): both texts to every rank.
        const int other = differ.front();
        std::string ours = rank == 0 ? serialize(fields[f]) : std::string();
        comm.broadcast(ours, 0);
        std::string theirs = rank == other ? serialize(fields[f]) : std::string();
        comm.broadcast(theirs, other);
        std::string key, ourValue, theirValue;
        firstDifference(deserialize(ours), deserialize(theirs), key, ourValue, theirValue);
        std::string where = fields[f].name;
        if (!key.empty() && key != fields[f].name) where += ", " + key;
        return (differ.size() == 1 ? "rank " + list(differ) + of + " differs"
                                   : "ranks " + list(differ) + of + " differ") +
               " from rank 0 in " + where + ": rank 0 has " + shown(ourValue) + ", rank " + std::to_string(other) +
               " has " + shown(theirValue) + "; every rank must run the same project with the same options";
    }
    return {};
}

}  // namespace strata

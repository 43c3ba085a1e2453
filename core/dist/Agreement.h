// Agreement: whether every rank of a data-parallel job describes its run the same way, and where not. The
// Trainer compares, at the start, everything that decides which collectives a rank calls and their sizes (the
// project, the options, the resume point): ranks that differ there would otherwise meet in mismatched
// collectives (MPI_ERR_TRUNCATE) or wait for each other forever.
//
// A description is a list of named fields, the same names in the same order on every rank (the code chooses
// them, never the input), each a list of (key, value) texts. Ranks exchange one 64-bit hash per field (one
// all-reduce); only when some differ do rank 0 and the first differing rank send that field whole (two
// broadcasts), so that every rank can name the first entry that differs and both values.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/dist/Communicator.h"

namespace strata {

struct AgreementField {
    std::string name;  // "max_steps (--max-steps)"
    // (key, value) pairs; a plain field has one, keyed by its name. Keys of a structured field name the part
    // ("training.learning_rate").
    std::vector<std::pair<std::string, std::string>> entries;
};

// Collective: every rank calls it with its own fields. Empty when every rank's fields equal rank 0's;
// otherwise the same message on every rank: "rank 1 of 2 differs from rank 0 in max_steps (--max-steps):
// rank 0 has none, rank 1 has 5" (the first field, in order, in which any rank differs; every rank that
// differs in it; the first entry that differs). A rank with another number of fields (another build) is
// named as such.
std::string compareAcrossRanks(Communicator& comm, const std::vector<AgreementField>& fields);

}  // namespace strata

#include "core/data/ImageFolder.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "core/data/CsvReader.h"
#include "core/io/FormatError.h"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

// A class folder's name becomes a class name in the project file and the exports: it must be text.
std::string nameProblem(const std::string& name) {
    size_t i = 0;
    while (i < name.size()) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c < 0x20 || c == 0x7f) return "its name holds a control character";
        const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
        if (extra < 0 || i + size_t(extra) >= name.size()) return "its name is not UTF-8 text";
        for (int k = 1; k <= extra; ++k)
            if ((static_cast<unsigned char>(name[i + size_t(k)]) >> 6) != 0x2) return "its name is not UTF-8 text";
        i += size_t(extra) + 1;
    }
    return {};
}

[[noreturn]] void stopAt(const std::string& path, const std::string& reason) {
    throw DataError::inFile(path, reason + " (strict_images is on; turn it off to skip such files)");
}

void skip(ImageList& list, bool strict, const std::string& path, const std::string& reason) {
    if (strict) stopAt(path, reason);
    list.skipped.push_back({path, reason});
}

// One entry of a folder as the listing sees it: a file (or a link to one) to list, a folder to enter, or a
// problem that skips it (a link loop, a link to nothing, a folder that cannot be read).
struct Entry {
    fs::path path;
    enum Kind { File, Folder, Problem } kind = Problem;
    std::string problem;
    bool missing = false;  // no such path at all

    static Entry failed(fs::path path, std::string why) {
        Entry e;
        e.path = std::move(path);
        e.problem = std::move(why);
        return e;
    }
};

// What `path` is, by lstat and then (for a link) stat, never throwing: a symbolic link loop or a link whose target
// is gone is a problem naming the link, not a filesystem_error that ends the listing.
Entry classify(const fs::path& path) {
    Entry e;
    e.path = path;
    std::error_code ec;
    const fs::file_status own = fs::symlink_status(path, ec);
    if (ec) {
        e.missing = own.type() == fs::file_type::not_found;
        e.problem = e.missing ? "does not exist" : "cannot be read: " + ec.message();
        return e;
    }
    const bool link = fs::is_symlink(own);
    const fs::file_status target = link ? fs::status(path, ec) : own;
    if (link && ec) {
        // ELOOP: a link that leads back to itself; ENOENT: its target is gone; EACCES: a folder on the way is closed.
        std::error_code readEc;
        const fs::path to = fs::read_symlink(path, readEc);
        const std::string where = readEc ? std::string() : " (-> " + to.string() + ")";
        e.problem = ec == std::errc::too_many_symbolic_link_levels
                        ? "a symbolic link loop" + where + ": " + ec.message()
                    : ec == std::errc::no_such_file_or_directory
                        ? "a symbolic link to nothing" + where + ": its target does not exist"
                        : "a symbolic link that cannot be followed" + where + ": " + ec.message();
        return e;
    }
    if (link && target.type() == fs::file_type::not_found) {
        e.problem = "a symbolic link to nothing: its target does not exist";
        return e;
    }
    if (fs::is_directory(target)) {
        e.kind = Entry::Folder;
    } else if (fs::is_regular_file(target)) {
        e.kind = Entry::File;
    } else {
        e.problem = "not a regular file (a device, pipe or socket)";
    }
    return e;
}

// The entries of one folder, hidden ones (.DS_Store, .ipynb_checkpoints) left out, sorted by path (so the
// listing is the same on every file system). False with `why` when the folder cannot be read.
bool entriesOf(const fs::path& dir, std::vector<Entry>& out, std::string& why) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    for (const fs::directory_iterator end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename().string().starts_with(".")) continue;
        out.push_back(classify(it->path()));
    }
    if (ec) {
        why = "cannot list the folder: " + ec.message();
        return false;
    }
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
    return true;
}

// Every file under `dir`, and every entry that cannot be listed, in path order. Folders inside are entered
// unless they are links: a link to a folder inside a class folder is not followed (it could lead back up, or
// anywhere), and is reported as a skipped entry rather than ignored.
void filesUnder(const fs::path& dir, std::vector<Entry>& out) {
    std::vector<Entry> entries;
    std::string why;
    if (!entriesOf(dir, entries, why)) {
        out.push_back(Entry::failed(dir, why));
        return;
    }
    for (Entry& e : entries) {
        if (e.kind == Entry::Folder) {
            std::error_code ec;
            if (fs::is_symlink(fs::symlink_status(e.path, ec))) {
                out.push_back(Entry::failed(e.path,
                                            "a symbolic link to a folder inside a class folder: not followed (link "
                                            "the class folder itself, or copy the files in)"));
            } else {
                filesUnder(e.path, out);
            }
        } else {
            out.push_back(std::move(e));
        }
    }
}

void addFile(ImageList& list, bool strict, const fs::path& file, int32_t label) {
    const std::string path = file.string();
    if (!isImageFileName(path)) {
        skip(list, strict, path, "not an image file name (PNG, JPEG, BMP, PGM or PPM expected)");
        return;
    }
    list.paths.push_back(path);
    list.labels.push_back(label);
}

ImageList listFolder(const fs::path& root, const std::vector<std::string>& givenNames, bool strict) {
    ImageList list;
    std::vector<Entry> top;
    std::string why;
    if (!entriesOf(root, top, why)) throw DataError::inFile(root.string(), why);
    std::vector<fs::path> classDirs;
    for (const Entry& e : top) {
        if (e.kind == Entry::Folder) {
            classDirs.push_back(e.path);  // a link to a folder is a class folder too (train/cat -> /data/cats)
        } else {
            skip(list, strict, e.path.string(), e.kind == Entry::File ? "not inside a class folder" : e.problem);
        }
    }
    std::map<std::string, int32_t> index;
    for (size_t i = 0; i < givenNames.size(); ++i) index[givenNames[i]] = static_cast<int32_t>(i);
    list.classNames = givenNames;
    for (const fs::path& dir : classDirs) {
        const std::string name = dir.filename().string();
        if (const std::string problem = nameProblem(name); !problem.empty()) {
            skip(list, strict, dir.string(), "class folder skipped: " + problem);
            continue;
        }
        std::vector<Entry> files;
        filesUnder(dir, files);
        if (!files.empty() && files.front().kind == Entry::Problem && files.front().path == dir) {
            skip(list, strict, dir.string(), "class folder skipped: " + files.front().problem);
            continue;
        }
        const bool anyImage = std::any_of(files.begin(), files.end(), [](const Entry& f) {
            return f.kind == Entry::File && isImageFileName(f.path.string());
        });
        int32_t label = 0;
        if (!givenNames.empty()) {
            auto it = index.find(name);
            if (it == index.end()) {
                skip(list, strict, dir.string(),
                     "class folder skipped: '" + name +
                         "' is not among the classes (dataset.class_names or the "
                         "training folder's classes)");
                continue;
            }
            label = it->second;
        } else {
            if (!anyImage) {
                skip(list, strict, dir.string(),
                     "empty class folder (no PNG, JPEG, BMP, PGM or PPM file): not a class");
                continue;
            }
            label = static_cast<int32_t>(list.classNames.size());
            list.classNames.push_back(name);
        }
        for (const Entry& f : files) {
            if (f.kind == Entry::Problem) {
                skip(list, strict, f.path.string(), f.problem);
            } else {
                addFile(list, strict, f.path, label);
            }
        }
    }
    return list;
}

ImageList listCsv(const fs::path& csv, const std::vector<std::string>& givenNames, bool strict) {
    const std::vector<CsvRecord> rows = readCsvFile(csv.string());
    const fs::path base = csv.parent_path();
    ImageList list;
    std::vector<std::pair<fs::path, std::string>> entries;
    for (size_t r = 0; r < rows.size(); ++r) {
        const CsvRecord& row = rows[r];
        if (r == 0 && row.fields.size() == 2 && (row.fields[0] == "path" || row.fields[0] == "file") &&
            row.fields[1] == "label")
            continue;
        if (row.fields.size() != 2 || row.fields[0].empty() || row.fields[1].empty())
            throw DataError::atLine(csv.string(), row.line,
                                    "expected two fields, path,label (got " + std::to_string(row.fields.size()) + ")");
        fs::path p(row.fields[0]);
        if (p.is_relative()) p = base / p;
        entries.emplace_back(p, row.fields[1]);
    }
    std::map<std::string, int32_t> index;
    if (!givenNames.empty()) {
        list.classNames = givenNames;
    } else {
        std::vector<std::string> names;
        for (const auto& e : entries) names.push_back(e.second);
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        // Integer labels 0..K-1 keep their numbers; other labels are numbered in sorted order.
        const bool integers = std::all_of(names.begin(), names.end(), [](const std::string& n) {
            return !n.empty() && n.size() < 7 && std::all_of(n.begin(), n.end(), ::isdigit);
        });
        if (integers) {
            int maxLabel = 0;
            for (const std::string& n : names) maxLabel = std::max(maxLabel, std::stoi(n));
            for (int i = 0; i <= maxLabel; ++i) list.classNames.push_back(std::to_string(i));
        } else {
            list.classNames = names;
        }
    }
    for (size_t i = 0; i < list.classNames.size(); ++i) index[list.classNames[i]] = static_cast<int32_t>(i);
    for (const auto& [path, label] : entries) {
        auto it = index.find(label);
        if (it == index.end()) {
            skip(list, strict, path.string(), "label '" + label + "' is not among the classes");
            continue;
        }
        if (const std::string problem = nameProblem(label); !problem.empty()) {
            skip(list, strict, path.string(), "label skipped: " + problem);
            continue;
        }
        addFile(list, strict, path, it->second);
    }
    return list;
}

}  // namespace

ImageList listImages(const std::string& source, const std::vector<std::string>& classNames, bool strict) {
    const Entry root = classify(fs::path(source));
    ImageList list;
    if (root.kind == Entry::Folder) {
        list = listFolder(root.path, classNames, strict);
    } else if (root.kind == Entry::File) {
        list = listCsv(root.path, classNames, strict);
    } else if (root.missing) {
        throw DataError::inFile(source, "no such folder or CSV file");
    } else {
        throw DataError::inFile(source, "not a folder or CSV file that can be read: " + root.problem);
    }
    if (list.paths.empty())
        throw DataError::inFile(
            source, "holds no image (PNG, JPEG, BMP, PGM or PPM) in a class folder" +
                        std::string(list.skipped.empty() ? ""
                                                         : "; skipped: " + list.skipped.front().path + ": " +
                                                               list.skipped.front().reason));
    return list;
}

std::vector<std::string> pairTargetImages(const ImageList& list, const std::string& source,
                                          const std::string& targetRoot) {
    std::error_code ec;
    const bool listedFolder = fs::is_directory(source, ec);
    const std::string inputRoot = listedFolder ? source : fs::path(source).parent_path().string();
    const fs::path in = fs::path(inputRoot).lexically_normal();
    const fs::path out = fs::path(targetRoot).lexically_normal();
    if (!fs::is_directory(out, ec))
        throw DataError::inFile(targetRoot,
                                "no such folder of target images (dataset.target_path or "
                                "validation_target_path)");
    auto relativeName = [&](const std::string& path) {
        const fs::path rel = fs::path(path).lexically_normal().lexically_relative(in);
        return rel.empty() || *rel.begin() == ".." ? fs::path() : rel;
    };
    std::vector<std::string> targets;
    std::string firstMissing;
    size_t missing = 0;
    for (const std::string& path : list.paths) {
        const fs::path rel = relativeName(path);
        if (rel.empty())
            throw DataError::inFile(
                path, "is not inside " + inputRoot + ": image_target folder pairs images by their path relative to it");
        const fs::path target = out / rel;
        if (!fs::is_regular_file(target, ec) && missing++ == 0)
            firstMissing = path + " has no target image " + target.string();
        targets.push_back(target.string());
    }
    if (missing > 0)
        throw DataError::inFile(
            targetRoot,
            firstMissing +
                (missing > 1 ? " (and " + std::to_string(missing - 1) + " more images without one)" : std::string()) +
                "; every image needs a target of the same relative name");
    if (!listedFolder) return targets;
    // A target without an image is a sign the folders do not correspond (a renamed or missing file); the images
    // the listing skipped (and the files in a skipped folder) keep theirs.
    std::set<fs::path> known;
    for (const std::string& path : list.paths) known.insert(relativeName(path));
    for (const SkippedFile& f : list.skipped) known.insert(relativeName(f.path));
    for (fs::recursive_directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename().string().starts_with(".")) {
            if (it->is_directory(ec)) it.disable_recursion_pending();
            continue;
        }
        if (!it->is_regular_file(ec) || !isImageFileName(it->path().string())) continue;
        const fs::path rel = it->path().lexically_relative(out);
        bool matched = false;
        for (fs::path p = rel; !p.empty() && !matched; p = p.parent_path()) matched = known.count(p) > 0;
        if (!matched)
            throw DataError::inFile(it->path().string(),
                                    "is a target image without an input image " + (in / rel).string() +
                                        "; remove it or add its input (the folders must hold the same names)");
    }
    if (ec) throw DataError::inFile(targetRoot, "cannot list the folder of target images: " + ec.message());
    return targets;
}

std::pair<int64_t, int64_t> decodeFitted(const std::string& path, const Shape& shape, ResizePolicy policy, float* out) {
    const std::vector<int64_t>& dims = shape.dims();
    const Image image = readImageFile(path, DecodeHint{dims[1], dims[2], policy});
    const FittedImage fit = fitImageToInput(image, shape, policy);
    std::copy(fit.values.begin(), fit.values.end(), out);
    return image.fileWidth > 0 ? std::make_pair(image.fileWidth, image.fileHeight)
                               : std::make_pair(image.width, image.height);
}

std::string decodeProblem(const std::exception& e) {
    if (const auto* f = dynamic_cast<const FormatError*>(&e)) return f->problem();
    return e.what();
}

DecodedImages decodeImages(const std::vector<std::string>& paths, const Shape& shape, ResizePolicy policy, int threads,
                           bool strict) {
    const std::vector<int64_t>& dims = shape.dims();
    if (dims.size() != 3 || (dims[0] != 1 && dims[0] != 3) || dims[1] < 1 || dims[2] < 1)
        throw DataError("dataset.image_shape: " + shape.toString() + " is not [C, H, W] with C = 1 or 3");
    const int64_t n = shape.numel();
    const size_t count = paths.size();
    std::vector<float> values(count * static_cast<size_t>(n));
    std::vector<std::string> errors(count);
    std::vector<char> failed(count, 0);
    std::vector<std::pair<int64_t, int64_t>> sizes(count);
    std::atomic<size_t> nextIndex{0};
    std::atomic<bool> stop{false};
    auto work = [&] {
        for (;;) {
            if (stop.load(std::memory_order_relaxed)) return;
            const size_t i = nextIndex.fetch_add(1);
            if (i >= count) return;
            try {
                sizes[i] = decodeFitted(paths[i], shape, policy, values.data() + static_cast<int64_t>(i) * n);
            } catch (const std::exception& e) {
                errors[i] = decodeProblem(e);
                failed[i] = 1;
            }
            // Indices are claimed in order, so every index below a failure is finished when the workers
            // stop: the first bad file in list order is reported whatever the timing.
            if (failed[i] && strict) stop = true;
        }
    };
    int workers = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(workers), std::max<size_t>(1, count)));
    std::vector<std::thread> pool;
    for (int t = 1; t < workers; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();

    DecodedImages out;
    for (size_t i = 0; i < count; ++i) {
        if (failed[i]) {
            if (strict) stopAt(paths[i], errors[i]);
            out.skipped.push_back({paths[i], errors[i]});
        } else {
            out.kept.push_back(static_cast<int64_t>(i));
            out.sizes.push_back(sizes[i]);
        }
    }
    if (out.kept.size() == count) {
        out.values = std::move(values);
    } else {
        out.values.resize(out.kept.size() * static_cast<size_t>(n));
        for (size_t k = 0; k < out.kept.size(); ++k)
            std::copy_n(values.begin() + out.kept[k] * n, n, out.values.begin() + static_cast<int64_t>(k) * n);
    }
    return out;
}

}  // namespace strata::data

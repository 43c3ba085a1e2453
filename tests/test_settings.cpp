// The settings table (core/graph/Settings.h), walked: every setting round-trips through the
// project file; every value outside its range or choices is refused with its JSON path and its
// limit; every choice parses and prints back; each entry writes its own member; strata-train's
// flags refuse what the file refuses, naming the flag and the limit; and the project files in the
// repository read and write back byte for byte. Each setting says when it applies (momentum with SGD only):
// every condition is walked. (The panels' ranges and enabling: tests/ui/test_setting_widgets.)
#include <QtTest>
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/graph/Project.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string readText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Values a setting accepts, as SettingSpec::set takes them (a Choice as its enum value).
std::vector<Json> acceptedValues(const SettingInfo& s) {
    switch (s.kind) {
        case SettingKind::Int:
        case SettingKind::Int64: return {s.intMin, s.intMax, s.intMin + (s.intMax - s.intMin) / 3};
        case SettingKind::UInt64: return {uint64_t(0), UINT64_MAX, uint64_t(1) << 63};
        case SettingKind::Double: {
            const double top = s.maxOpen ? std::nextafter(s.max, s.min) : s.max;
            return {s.min, top, s.min + (top - s.min) / 7};
        }
        case SettingKind::Float: return {double(float(s.min)), double(float(s.max)), double(0.1f)};
        case SettingKind::Bool: return {true, false};
        case SettingKind::String:
        case SettingKind::Path:
            if (s.nonEmpty) return {"x", "cuda:1", "a/b \u00fc"};
            return {"", "a/b \u00fc", "../c d.csv"};
        case SettingKind::Choice: {
            std::vector<Json> out;
            for (const SettingChoice& c : s.choices) out.push_back(c.value);
            return out;
        }
        case SettingKind::StringList: return {Json::array(), Json::array({"a", "b/c", "\u00fc"})};
        case SettingKind::IntList:
            return {Json(std::vector<int64_t>(s.minItems, s.intMin)), Json(std::vector<int64_t>(s.maxItems, s.intMax))};
    }
    return {};
}

struct Refused {
    Json value;          // as the file holds it
    std::string suffix;  // after the setting's JSON path ("/0" for a list element)
    std::string fragment;
};

// Values the file must refuse, with where and what the message says.
std::vector<Refused> refusedValues(const SettingInfo& s) {
    const std::string range = "is out of range (" + s.rangeText() + ")";
    std::vector<Refused> out;
    switch (s.kind) {
        case SettingKind::Int:
        case SettingKind::Int64:
            out.push_back({s.intMin - 1, "", std::to_string(s.intMin - 1) + " " + range});
            if (s.intMax < INT64_MAX)
                out.push_back({s.intMax + 1, "", std::to_string(s.intMax + 1) + " " + range});
            else
                out.push_back({uint64_t(INT64_MAX) + 1, "", range});
            out.push_back({1.5, "", "expected an integer, got number 1.5"});
            out.push_back({"7", "", "expected an integer, got string"});
            break;
        case SettingKind::UInt64:
            out.push_back({-1, "", "-1 " + range});
            out.push_back({"7", "", "expected an integer, got string"});
            break;
        case SettingKind::Double:
        case SettingKind::Float:
            out.push_back({s.min - 1, "", range});
            if (s.maxOpen)
                out.push_back({s.max, "", "excluding"});
            else if (s.max < DBL_MAX)
                out.push_back({s.max * 2, "", range});
            out.push_back({"0.5", "", "expected a number, got string"});
            break;
        case SettingKind::Bool: out.push_back({"yes", "", "expected a boolean, got string"}); break;
        case SettingKind::String:
        case SettingKind::Path:
            out.push_back({4, "", "expected a string, got integer"});
            if (s.nonEmpty) out.push_back({"", "", "must not be empty"});
            break;
        case SettingKind::Choice:
            out.push_back({"no_such_choice", "", "unknown value 'no_such_choice' (" + s.rangeText() + ")"});
            out.push_back({s.choices.front().value, "", "expected a string, got integer"});
            break;
        case SettingKind::StringList:
            out.push_back({"a", "", "expected an array of strings"});
            out.push_back({Json::array({"a", 1}), "/1", "expected a string, got integer"});
            break;
        case SettingKind::IntList:
            out.push_back({Json(std::vector<int64_t>(s.maxItems + 1, s.intMin)), "", "expected an array of"});
            if (s.minItems > 0) out.push_back({Json::array(), "", "expected an array of"});
            out.push_back({Json::array({s.intMin, s.intMin - 1}), "/1", integerRangeText(s.intMin, s.intMax)});
            break;
    }
    return out;
}

// The value as the file writes it.
Json fileValue(const SettingInfo& s, const Json& value) {
    return s.kind == SettingKind::Choice ? Json(s.choiceName(value.get<int>())) : value;
}

template <class S>
S& settingsOf(Project& p) {
    if constexpr (std::is_same_v<S, DatasetSettings>)
        return p.dataset;
    else
        return p.training;
}
template <class S>
const S& settingsOf(const Project& p) {
    if constexpr (std::is_same_v<S, DatasetSettings>)
        return p.dataset;
    else
        return p.training;
}

ProjectError expectRefused(const Json& json) {
    try {
        parseProject(json.dump(2), "walk.strata");
    } catch (const ProjectError& e) {
        return e;
    }
    qFatal("accepted: %s", json.dump().c_str());
}

// Every enum's spelling through its settingName overload, by the key that holds it.
std::string nameViaEnum(const SettingInfo& s, int v) {
    const std::string& key = s.key;
    if (key == "task") return settingName(TaskKind(v));
    if (key == "image_target") return settingName(ImageTarget(v));
    if (key == "kind") return settingName(DatasetKind(v));
    if (key == "tokenizer") return settingName(Tokenizer(v));
    if (key == "image_resize") return settingName(ImageResize(v));
    if (key == "image_loading") return settingName(ImageLoading(v));
    if (key == "normalization") return settingName(NormalizationMode(v));
    if (key == "optimizer") return settingName(OptimizerKind(v));
    if (key == "loss") return settingName(LossKind(v));
    if (key == "schedule") return settingName(ScheduleKind(v));
    if (key == "early_stopping_metric") return settingName(EarlyStoppingMetric(v));
    if (key == "precision") return settingName(ComputePrecision(v));
    if (key == "dist_mode") return settingName(DistMode(v));
    qFatal("no settingName overload for the choice setting %s: add one (Settings.h)", s.dottedName().c_str());
}

}  // namespace

class TestSettings : public QObject {
    Q_OBJECT

private:
    template <class S>
    void walkRoundTrips(const std::vector<SettingSpec<S>>& specs) {
        for (const SettingSpec<S>& spec : specs) {
            for (const Json& value : acceptedValues(spec)) {
                Project p;
                spec.set(settingsOf<S>(p), value);
                QVERIFY2(spec.get(settingsOf<S>(p)) == value, (spec.dottedName() + " = " + value.dump()).c_str());
                const Json j = projectToJson(p);
                // A setting omitted at its default is not in the file then; it reads back as the default.
                if (spec.omittedWhenDefault && !j[spec.groupKey()].contains(spec.key)) {
                    QVERIFY2(value == spec.get(S{}), spec.dottedName().c_str());
                    QVERIFY2(parseProject(j.dump(2), "walk.strata") == p, spec.dottedName().c_str());
                    continue;
                }
                const Json& written = j[spec.groupKey()][spec.key];
                if (spec.kind == SettingKind::Float)  // the float's shortest decimal: 0.1f is written 0.1
                    QVERIFY2(float(written.get<double>()) == value.get<float>(), spec.dottedName().c_str());
                else
                    QVERIFY2(written == fileValue(spec, value), spec.dottedName().c_str());
                const Project back = parseProject(j.dump(2), "walk.strata");
                QVERIFY2(
                    spec.get(settingsOf<S>(back)) == spec.get(settingsOf<S>(p)),
                    (spec.dottedName() + " = " + value.dump() + " read back as " + spec.get(settingsOf<S>(back)).dump())
                        .c_str());
                QVERIFY2(back == p, spec.dottedName().c_str());
            }
        }
    }

    template <class S>
    void walkRefusals(const std::vector<SettingSpec<S>>& specs, int& count) {
        for (const SettingSpec<S>& spec : specs) {
            for (const Refused& r : refusedValues(spec)) {
                Json j = projectToJson(Project{});
                j[spec.groupKey()][spec.key] = r.value;
                const ProjectError e = expectRefused(j);
                QVERIFY2(e.jsonPath() == spec.jsonPath() + r.suffix,
                         (spec.dottedName() + " = " + r.value.dump() + ": " + e.what()).c_str());
                QVERIFY2(contains(e.what(), r.fragment), (spec.dottedName() + " = " + r.value.dump() + ": '" +
                                                          r.fragment + "' missing from: " + e.what())
                                                             .c_str());
                QVERIFY2(contains(e.what(), "walk.strata"), e.what());
                ++count;
            }
        }
    }

    // Setting one entry changes what that entry reads and nothing any other entry reads.
    template <class S>
    void walkMembers(const std::vector<SettingSpec<S>>& specs) {
        const S defaults;
        for (const SettingSpec<S>& spec : specs) {
            bool changed = false;
            for (const Json& value : acceptedValues(spec)) {
                S s;
                spec.set(s, value);
                changed = changed || !(s == defaults);
                for (const SettingSpec<S>& other : specs)
                    if (&other != &spec)
                        QVERIFY2(other.get(s) == other.get(defaults),
                                 (spec.dottedName() + " wrote " + other.dottedName()).c_str());
            }
            QVERIFY2(changed, (spec.dottedName() + " writes no member").c_str());
        }
    }

private slots:
    void tableIsWellFormed() {
        std::set<std::string> flags;
        auto check = [&](const SettingInfo& s, std::set<std::string>& keys) {
            QVERIFY2(keys.insert(s.key).second, ("duplicate key " + s.dottedName()).c_str());
            QVERIFY2(!s.label.empty() && !s.help.empty(), (s.dottedName() + " needs a label and help").c_str());
            if (!s.flag.empty()) {
                QVERIFY2(s.flag.rfind("--", 0) == 0, s.flag.c_str());
                QVERIFY2(flags.insert(s.flag).second, ("duplicate flag " + s.flag).c_str());
                QCOMPARE(settingForFlag(s.flag), &s);
                QCOMPARE(s.flagValue.empty(), s.kind == SettingKind::Bool);
            }
            if (s.isInteger() || s.kind == SettingKind::IntList) QVERIFY2(s.intMin <= s.intMax, s.key.c_str());
            if (s.isNumber()) QVERIFY2(s.min < s.max && std::isfinite(s.max), s.key.c_str());
            if (s.kind == SettingKind::Float) QVERIFY2(s.max <= FLT_MAX, s.key.c_str());
            if (s.kind == SettingKind::IntList) QVERIFY2(s.minItems <= s.maxItems && s.maxItems > 0, s.key.c_str());
            QCOMPARE(s.kind == SettingKind::Choice, !s.choices.empty());
            QCOMPARE(s.jsonPath(), "/" + std::string(s.groupKey()) + "/" + s.key);
        };
        std::set<std::string> datasetKeys, trainingKeys;
        for (const auto& s : datasetSettingSpecs()) {
            QCOMPARE(s.group, SettingGroup::Dataset);
            check(s, datasetKeys);
        }
        for (const auto& s : trainingSettingSpecs()) {
            QCOMPARE(s.group, SettingGroup::Training);
            check(s, trainingKeys);
        }
        QCOMPARE(settingsWithFlags().size(), flags.size());
        QVERIFY(settingForFlag("--max-steps") == nullptr);  // a run option, not a setting
        // The file holds exactly the table's keys, in the table's order; those omitted at their default (the
        // task's settings, added after files existed) only when set.
        const Json j = projectToJson(Project{});
        std::vector<std::string> written, listed;
        for (auto it = j["training"].begin(); it != j["training"].end(); ++it) written.push_back(it.key());
        for (const auto& s : trainingSettingSpecs())
            if (!s.omittedWhenDefault) listed.push_back(s.key);
        QCOMPARE(written, listed);
        written.clear();
        listed.clear();
        for (auto it = j["dataset"].begin(); it != j["dataset"].end(); ++it) written.push_back(it.key());
        for (const auto& s : datasetSettingSpecs())
            if (!s.omittedWhenDefault) listed.push_back(s.key);
        QCOMPARE(written, listed);
    }

    void everySettingRoundTrips() {
        walkRoundTrips(datasetSettingSpecs());
        walkRoundTrips(trainingSettingSpecs());
    }

    void everyOutOfRangeValueIsRefused() {
        int count = 0;
        walkRefusals(datasetSettingSpecs(), count);
        walkRefusals(trainingSettingSpecs(), count);
        qInfo("%d refusals checked", count);
        QVERIFY(count > 100);
        // The limits settled in issue 16 (Settings.cpp says why), as the file states them.
        QCOMPARE(trainingSetting("batch_size").rangeText(), std::string("1 to 16777216"));
        QCOMPARE(datasetSetting("max_tokens").rangeText(), std::string("1 to 1048576"));
        QCOMPARE(datasetSetting("max_vocab").rangeText(), std::string("3 to 2147483647"));
        QCOMPARE(trainingSetting("threads").rangeText(), std::string("0 to 4096"));
    }

    void everyEntryWritesItsOwnMember() {
        walkMembers(datasetSettingSpecs());
        walkMembers(trainingSettingSpecs());
    }

    void everyChoiceParsesAndPrintsBack() {
        int choices = 0;
        auto walk = [&](const SettingInfo& s) {
            if (s.kind != SettingKind::Choice) return;
            std::set<int> values;
            for (const SettingChoice& c : s.choices) {
                QVERIFY2(values.insert(c.value).second, (s.dottedName() + ": duplicate value").c_str());
                QVERIFY2(!c.label.empty(), (s.dottedName() + ": " + c.name + " has no label").c_str());
                QCOMPARE(s.parseChoice(c.name), c.value);
                QCOMPARE(s.choiceName(c.value), c.name);
                QCOMPARE(nameViaEnum(s, c.value), c.name);
                ++choices;
            }
            // Every enumerator is listed: the enums count from 0 without gaps.
            QCOMPARE(*values.rbegin(), int(values.size()) - 1);
            try {
                s.parseChoice("Nope");
                QFAIL("accepted 'Nope'");
            } catch (const std::invalid_argument& e) {
                QVERIFY2(contains(e.what(), "unknown value 'Nope' (one of: " + s.choices.front().name), e.what());
            }
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument, s.choiceName(int(s.choices.size())));
        };
        for (const auto& s : datasetSettingSpecs()) walk(s);
        for (const auto& s : trainingSettingSpecs()) walk(s);
        // task 4, kind 5, tokenizer 3, resize 2, loading 3, normalization 3, image_target 3; optimizer 3, loss 5,
        // schedule 4, early stopping 2, precision 3, dist_mode 3.
        QCOMPARE(choices, 4 + 5 + 3 + 2 + 3 + 3 + 3 + 3 + 5 + 4 + 2 + 3 + 3);
        // The precision spellings are the backend's.
        for (ComputePrecision p : {ComputePrecision::F32, ComputePrecision::BF16, ComputePrecision::F16})
            QCOMPARE(settingName(p), std::string(computePrecisionName(p)));
    }

    void flagsRefuseWhatTheFileRefuses() {
        // The examples.
        const SettingInfo* batch = settingForFlag("--batch");
        QVERIFY(batch);
        for (const char* text : {"0", "4294967360", "-3"}) {
            try {
                parseSettingFlag(*batch, text);
                QFAIL(text);
            } catch (const std::invalid_argument& e) {
                QVERIFY2(contains(e.what(), std::string("--batch: ") + text + " is out of range (1 to 16777216)"),
                         e.what());
            }
        }
        int checked = 0;
        for (const SettingInfo* s : settingsWithFlags()) {
            // Every value the file refuses for a reason other than its JSON type is refused on the command line,
            // with the file's words after the flag.
            for (const Refused& r : refusedValues(*s)) {
                if (!r.suffix.empty() || contains(r.fragment, "expected")) continue;
                const std::string text = r.value.is_string() ? r.value.get<std::string>() : r.value.dump();
                try {
                    parseSettingFlag(*s, text);
                    QFAIL((s->flag + " " + text).c_str());
                } catch (const std::invalid_argument& e) {
                    QVERIFY2(contains(e.what(), s->flag + ": ") && contains(e.what(), r.fragment), e.what());
                    ++checked;
                }
            }
            // What it accepts lands in the setting.
            for (const Json& value : acceptedValues(*s)) {
                if (s->kind == SettingKind::Bool && !value.get<bool>()) continue;  // a bool flag only turns on
                std::string text = value.is_string() ? value.get<std::string>() : value.dump();
                if (s->kind == SettingKind::Choice) text = s->choiceName(value.get<int>());
                if (s->nonEmpty && text.empty()) continue;
                const Json parsed = parseSettingFlag(*s, s->kind == SettingKind::Bool ? "" : text).front().value;
                Project p;
                applySetting(p.dataset, p.training, *s, parsed);
                const Json got = s->group == SettingGroup::Dataset ? datasetSetting(s->key).get(p.dataset)
                                                                   : trainingSetting(s->key).get(p.training);
                QVERIFY2(got == value, (s->flag + " " + text + " gave " + got.dump()).c_str());
            }
        }
        QVERIFY(checked >= 10);
        // An integer too large for any integer type is out of range, not "not an integer".
        try {
            parseSettingFlag(*settingForFlag("--train-limit"), "99999999999999999999");
            QFAIL("accepted 1e20");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(contains(e.what(), "--train-limit: 99999999999999999999 is out of range (0 to "), e.what());
        }
    }

    // Each condition names a setting of its own group: a Choice and some of its values, or a number.
    void conditionsAreWellFormed() {
        int conditions = 0;
        auto check = [&](const SettingInfo& s, auto find) {
            for (const SettingCondition& c : s.appliesWhen) {
                ++conditions;
                if (c.kind == SettingCondition::Kind::DataParallel) {
                    QCOMPARE(s.group, SettingGroup::Training);
                    continue;
                }
                QVERIFY2(c.key != s.key, s.key.c_str());
                const SettingInfo& other = find(c.key);  // throws for a key the table does not have
                if (c.kind == SettingCondition::Kind::Positive) {
                    QVERIFY2(other.isInteger() || other.isNumber(), c.key.c_str());
                    continue;
                }
                QCOMPARE(other.kind, SettingKind::Choice);
                QVERIFY2(!c.values.empty() && c.values.size() < other.choices.size(), s.key.c_str());
                for (int v : c.values) QVERIFY2(!other.choiceName(v).empty(), s.key.c_str());
            }
            for (const SettingChoice& c : s.choices)
                if (!c.argumentKey.empty()) QVERIFY2(find(c.argumentKey).isInteger(), c.argumentKey.c_str());
        };
        for (const auto& s : datasetSettingSpecs())
            check(s, [](const std::string& k) -> const SettingInfo& { return datasetSetting(k); });
        for (const auto& s : trainingSettingSpecs())
            check(s, [](const std::string& k) -> const SettingInfo& { return trainingSetting(k); });
        QVERIFY(conditions >= 30);
    }

    // Walked: with every condition of a setting met it applies; breaking any one of them (each other choice of
    // a OneOf, 0 for a Positive, one process on one device for DataParallel) makes it not apply, and the
    // reason names what broke it.
    void everyConditionDecides() {
        int decided = 0;
        auto walk = [&](const SettingInfo& s) {
            if (s.appliesWhen.empty()) {
                QVERIFY(settingApplies(s, DatasetSettings{}, TrainingSettings{}, 1));
                return;
            }
            Project p;
            auto setOther = [&p, &s](const std::string& key, const Json& v) {
                applySetting(p.dataset, p.training,
                             s.group == SettingGroup::Dataset ? static_cast<const SettingInfo&>(datasetSetting(key))
                                                              : static_cast<const SettingInfo&>(trainingSetting(key)),
                             v);
            };
            auto meetAll = [&] {
                p = Project{};
                for (const SettingCondition& c : s.appliesWhen) {
                    if (c.kind == SettingCondition::Kind::OneOf) setOther(c.key, c.values.front());
                    if (c.kind == SettingCondition::Kind::Positive) setOther(c.key, 1);
                }
            };
            meetAll();
            QVERIFY2(settingApplies(s, p.dataset, p.training, 2), s.dottedName().c_str());
            QVERIFY(settingInapplicableReason(s, p.dataset, p.training, 2).empty());
            for (const SettingCondition& c : s.appliesWhen) {
                std::vector<std::pair<Json, int>> breaking;  // (value of c.key, ranks)
                if (c.kind == SettingCondition::Kind::DataParallel) breaking.push_back({Json(), 1});
                if (c.kind == SettingCondition::Kind::Positive) breaking.push_back({0, 2});
                if (c.kind == SettingCondition::Kind::OneOf) {
                    const SettingInfo& other = s.group == SettingGroup::Dataset
                                                   ? static_cast<const SettingInfo&>(datasetSetting(c.key))
                                                   : static_cast<const SettingInfo&>(trainingSetting(c.key));
                    for (const SettingChoice& choice : other.choices) {
                        const bool listed = std::find(c.values.begin(), c.values.end(), choice.value) != c.values.end();
                        meetAll();
                        setOther(c.key, choice.value);
                        QCOMPARE(settingApplies(s, p.dataset, p.training, 2), listed);
                        if (!listed) breaking.push_back({choice.value, 2});
                    }
                }
                for (const auto& [value, ranks] : breaking) {
                    meetAll();
                    if (!value.is_null()) setOther(c.key, value);
                    QVERIFY2(!settingApplies(s, p.dataset, p.training, ranks), s.dottedName().c_str());
                    const std::string why = settingInapplicableReason(s, p.dataset, p.training, ranks);
                    QVERIFY2(c.kind == SettingCondition::Kind::DataParallel ? contains(why, "data-parallel")
                                                                            : contains(why, c.key),
                             (s.dottedName() + ": " + why).c_str());
                    ++decided;
                }
            }
        };
        for (const auto& s : datasetSettingSpecs()) walk(s);
        for (const auto& s : trainingSettingSpecs()) walk(s);
        QVERIFY(decided >= 40);

        // The rules the training panel held (issue 36), now the table's.
        TrainingSettings t;
        const DatasetSettings d;
        t.optimizer = OptimizerKind::Adam;
        QVERIFY(!settingApplies(trainingSetting("momentum"), d, t, 1));
        QCOMPARE(settingInapplicableReason(trainingSetting("momentum"), d, t, 1),
                 std::string("with training.optimizer adam (it applies with sgd)"));
        QVERIFY(settingApplies(trainingSetting("beta2"), d, t, 1));
        t.schedule = ScheduleKind::Cosine;
        QVERIFY(settingApplies(trainingSetting("min_learning_rate"), d, t, 1));
        QVERIFY(!settingApplies(trainingSetting("step_gamma"), d, t, 1));
        QVERIFY(!settingApplies(trainingSetting("early_stopping_metric"), d, t, 1));
        t.earlyStoppingPatience = 3;
        QVERIFY(settingApplies(trainingSetting("early_stopping_metric"), d, t, 1));
        // Data parallel: several ranks, several devices, or not known (the workbench).
        const SettingInfo& dist = trainingSetting("dist_mode");
        QVERIFY(!settingApplies(dist, d, t, 1));
        QVERIFY(settingApplies(dist, d, t, 2));
        QVERIFY(settingApplies(dist, d, t, 0));
        t.device = "cpu,cpu";
        QVERIFY(settingApplies(dist, d, t, 1));
        QVERIFY(!settingApplies(trainingSetting("local_sgd_steps"), d, t, 1));  // sync
        t.distMode = DistMode::LocalSgd;
        QVERIFY(settingApplies(trainingSetting("local_sgd_steps"), d, t, 1));
        DatasetSettings folder;
        QCOMPARE(settingInapplicableReason(datasetSetting("decode_threads"), folder, t, 1),
                 std::string("with dataset.kind idx (it applies with image_folder)"));
        folder.kind = DatasetKind::ImageFolder;
        QVERIFY(!settingApplies(datasetSetting("cache_memory_mb"), folder, t, 1));  // loading: memory
        folder.imageLoading = ImageLoading::Cache;
        QVERIFY(settingApplies(datasetSetting("cache_memory_mb"), folder, t, 1));
    }

    void repositoryFilesWriteBackUnchanged() {
        // The table writes the format the hand-written reader and writer did: files written by them
        // come back byte for byte (minimal_mlp.strata and bench's are hand-formatted: same content only).
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        std::vector<std::string> files = {test::sourcePath("tests/data/projects/all_settings.strata"),
                                          test::sourcePath("tests/data/projects/minimal_mlp.strata"),
                                          test::sourcePath("bench/step_overhead.strata")};
        for (const auto& e : std::filesystem::directory_iterator(test::sourcePath("examples")))
            if (e.path().extension() == ".strata") files.push_back(e.path().string());
        int identical = 0;
        for (const std::string& file : files) {
            const Project p = readProject(file);
            const std::string copy = tmp.filePath("copy.strata").toStdString();
            writeProject(p, copy);
            QVERIFY2(readProject(copy) == p, file.c_str());
            const bool handFormatted = contains(file, "minimal_mlp") || contains(file, "step_overhead");
            if (!handFormatted) {
                QVERIFY2(readText(copy) == readText(file), (file + " changed on writing back").c_str());
                ++identical;
            }
        }
        QVERIFY(identical >= 5);
    }
};

QTEST_APPLESS_MAIN(TestSettings)
#include "test_settings.moc"

// Where runs go (core/train/RunFolder): beside a project whose folder can be written, in the per-user data
// folder when it cannot (an installed example), and found again wherever they went. Writability is injected:
// the tests run as root, for whom access(W_OK) succeeds on a chmod 555 folder (tests/readonly_project.sh runs
// strata-train as an ordinary user).
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/history/RunStore.h"
#include "core/train/RunFolder.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {

// Every folder under `readOnly` is not writable; everything else is.
WritableCheck readOnlyUnder(const std::string& readOnly) {
    return [readOnly](const std::string& folder) { return folder.rfind(readOnly, 0) != 0; };
}

bool writableEverywhere(const std::string& /*folder*/) { return true; }

void touchCheckpoint(const std::string& folder) {
    fs::create_directories(folder);
    std::ofstream(folder + "/best.safetensors") << "x";
}

Project named(const std::string& name, const std::string& id = {}) {
    Project p;
    p.name = name;
    p.id = id;
    return p;
}

}  // namespace

class RunFolderTest : public QObject {
    Q_OBJECT

private slots:
    void writableProjectKeepsRunsBesideIt() {
        QTemporaryDir dir;
        const std::string project = (dir.path() + "/p.strata").toStdString();
        const RunsPlace place = runsPlace(named("net"), project, "/data", writableEverywhere);
        QCOMPARE(place.folder, (dir.path() + "/runs").toStdString());
        QVERIFY(!place.perUser);
    }

    // An installed example: its folder is read-only, so its runs go to the per-user folder, under a folder of
    // its own (name and a hash of its path: the examples have no id).
    void readOnlyProjectRunsGoToTheUserFolder() {
        const std::string project = "/usr/share/strata/examples/langid_text.strata";
        const Project p = named("Language of a word");
        const RunsPlace place =
            runsPlace(p, project, "/home/u/.local/share/Strata/Strata", readOnlyUnder("/usr/share/strata/examples"));
        QVERIFY(place.perUser);
        QVERIFY2(place.folder.starts_with("/home/u/.local/share/Strata/Strata/runs/Language_of_a_word-"),
                 place.folder.c_str());
        QCOMPARE(place.folder, perUserRunsFolder(p, project, "/home/u/.local/share/Strata/Strata"));
        const std::string run = newRunFolder(p, project, "/home/u/.local/share/Strata/Strata",
                                             std::chrono::system_clock::now(), readOnlyUnder("/usr/share"));
        QVERIFY2(run.starts_with(place.folder + "/Language_of_a_word-"), run.c_str());
        // Another project of the same name elsewhere gets another folder; a project with an id is known by it.
        QVERIFY(perUserRunsFolder(p, "/opt/other/langid_text.strata", "/d") != perUserRunsFolder(p, project, "/d"));
        QCOMPARE(perUserRunsFolder(named("net", "3f0c9a"), project, "/d"), std::string("/d/runs/net-3f0c9a"));
    }

    // A runs/ folder that exists decides, not the project's folder: a writable folder with a read-only runs/
    // (made by another user) sends runs to the per-user folder too.
    void existingRunsFolderDecides() {
        QTemporaryDir dir;
        const std::string runs = (dir.path() + "/runs").toStdString();
        fs::create_directories(runs);
        const std::string project = (dir.path() + "/p.strata").toStdString();
        QVERIFY(runsPlace(named("net"), project, "/d", readOnlyUnder(runs)).perUser);
        QVERIFY(!runsPlace(named("net"), project, "/d", writableEverywhere).perUser);
    }

    void unsavedProjectRunsGoToTheUserFolder() {
        QCOMPARE(runsPlace(named("net"), {}, "/data/strata", writableEverywhere).folder,
                 std::string("/data/strata/runs"));
        QVERIFY(!runsPlace(named("net"), {}, "/data/strata", writableEverywhere).perUser);
    }

    // latestRunFolder looks in both places, whatever the folder's writability is now, and takes the newest.
    void latestRunIsFoundInEitherPlace() {
        QTemporaryDir dir;
        const std::string data = (dir.path() + "/data").toStdString();
        const std::string project = (dir.path() + "/ex/p.strata").toStdString();
        const Project p = named("net");
        QCOMPARE(latestRunFolder(p, project, data), std::string());
        const std::string perUser = perUserRunsFolder(p, project, data) + "/net-20260101-120000";
        touchCheckpoint(perUser);
        QCOMPARE(latestRunFolder(p, project, data), perUser);
        const std::string beside = (dir.path() + "/ex/runs/net-20250101-120000").toStdString();
        touchCheckpoint(beside);
        QCOMPARE(latestRunFolder(p, project, data), perUser);  // older beside the project
        const std::string newer = (dir.path() + "/ex/runs/net-20270101-120000").toStdString();
        touchCheckpoint(newer);
        QCOMPARE(latestRunFolder(p, project, data), newer);
        // Another project of the same name in another folder does not see these per-user runs.
        QCOMPARE(latestRunFolder(p, (dir.path() + "/other/p.strata").toStdString(), data), std::string());
    }

    // A checkpoint folder the training settings name, relative to a read-only project: refused, naming it.
    void checkpointFolderInReadOnlyProject() {
        QTemporaryDir dir;
        const std::string ro = (dir.path() + "/ro").toStdString();
        fs::create_directories(ro);
        const std::string project = ro + "/p.strata";
        Project p = named("net");
        QCOMPARE(checkpointFolderProblem(p, project, readOnlyUnder(ro)), std::string());  // none named
        p.training.checkpointDir = "ck/run1";
        const std::string problem = checkpointFolderProblem(p, project, readOnlyUnder(ro));
        QVERIFY2(problem.find("cannot write checkpoints to " + ro + "/ck/run1") != std::string::npos, problem.c_str());
        QVERIFY2(problem.find("relative to the project's folder") != std::string::npos, problem.c_str());
        QVERIFY2(problem.find(ro + " is not writable") != std::string::npos, problem.c_str());
        QCOMPARE(checkpointFolderProblem(p, project, writableEverywhere), std::string());
        // An absolute folder elsewhere is fine.
        p.training.checkpointDir = (dir.path() + "/elsewhere").toStdString();
        QCOMPARE(checkpointFolderProblem(p, project, readOnlyUnder(ro)), std::string());
    }

    // strata-train and the workbench share one per-user folder: the run history's.
    void userDataFolderIsTheRunHistorys() {
        QTemporaryDir dir;
        const QByteArray old = qgetenv("XDG_DATA_HOME");
        qputenv("XDG_DATA_HOME", dir.path().toUtf8());
        QCOMPARE(defaultUserDataDir(), (dir.path() + "/Strata/Strata").toStdString());
        QCOMPARE(history::RunStore::defaultPath(), defaultUserDataDir() + "/runs.sqlite");
        // An empty user folder means the default one.
        QCOMPARE(runsPlace(named("net"), {}, {}, writableEverywhere).folder, defaultUserDataDir() + "/runs");
        qputenv("XDG_DATA_HOME", old);
    }
};

QTEST_GUILESS_MAIN(RunFolderTest)
#include "test_run_folder.moc"

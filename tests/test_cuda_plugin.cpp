// The CUDA backend as a plugin (core/backend/CudaPlugin.h): without libstrata_cuda.so (the strata-cuda package
// not installed), or with a file there that is no plugin, the registry has a "cuda" provider that lists no GPU,
// says why, and refuses to open cuda:0 with that reason: never a silent CPU run. The plugin that loads is checked
// through the programs (CTest strata_train_loads_cuda_plugin, tests/CMakeLists.txt).
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>
#include <string>

#include "core/backend/Backend.h"
#include "core/backend/BackendRegistry.h"
#include "core/backend/CudaPlugin.h"

using namespace strata;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

class TestCudaPlugin : public QObject {
    Q_OBJECT

private:
    // The stand-in provider: no device, the reason, and cuda:0 refused with it.
    static void checkRefuses(BackendRegistry& registry, const std::string& expected) {
        BackendProvider* cuda = registry.provider(DeviceType::Cuda);
        QVERIFY2(cuda != nullptr, "no cuda provider registered: a GPU request would not say why it fails");
        QVERIFY(cuda->devices().empty());
        QVERIFY2(contains(cuda->unavailableReason(), expected), cuda->unavailableReason().c_str());
        for (const DeviceInfo& d : registry.devices()) QVERIFY(d.device.type != DeviceType::Cuda);
        try {
            registry.create(Device::cuda(0));
            QFAIL("cuda:0 opened without the CUDA plugin");
        } catch (const BackendError& e) {
            QVERIFY2(contains(e.what(), "cuda:0") && contains(e.what(), expected), e.what());
        }
        QVERIFY(registry.telemetry(Device::cuda(0)) == nullptr);
        // The CPU is untouched.
        QVERIFY(registry.create(Device::cpu()) != nullptr);
    }

private slots:
    void missingPluginSaysNotInstalled() {
        QTemporaryDir dir;
        const std::string absent = dir.filePath(QStringLiteral("lib/strata/libstrata_cuda.so")).toStdString();
        BackendRegistry registry;
        const CudaPluginStatus s = loadCudaPlugin(registry, {absent});
        QVERIFY(!s.loaded);
        QVERIFY(s.path.empty());
        QVERIFY2(contains(s.problem, "CUDA backend not installed") && contains(s.problem, absent) &&
                     contains(s.problem, "strata-cuda"),
                 s.problem.c_str());
        checkRefuses(registry, "CUDA backend not installed");
        QCOMPARE(cudaPluginStatus().problem, s.problem);
    }

    void fileThatIsNoLibraryIsRefusedWithTheLoadersReason() {
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("libstrata_cuda.so")).toStdString();
        std::ofstream(path) << "not an ELF file\n";
        BackendRegistry registry;
        const CudaPluginStatus s = loadCudaPlugin(registry, {path});
        QVERIFY(!s.loaded);
        QVERIFY2(contains(s.problem, "CUDA backend not usable: " + path + " could not be loaded ("), s.problem.c_str());
        checkRefuses(registry, "could not be loaded");
    }

    void defaultCandidatesAreBesideTheProgramAndInLibStrata() {
        qputenv("STRATA_CUDA_PLUGIN", "/opt/custom/libstrata_cuda.so");
        const std::vector<std::string> c = cudaPluginCandidates();
        qunsetenv("STRATA_CUDA_PLUGIN");
        const std::string dir = QCoreApplication::applicationDirPath().toStdString();
        QCOMPARE(c.size(), size_t(3));
        QCOMPARE(c[0], std::string("/opt/custom/libstrata_cuda.so"));
        QCOMPARE(c[1], dir + "/libstrata_cuda.so");
        QCOMPARE(c[2], dir + "/../lib/strata/libstrata_cuda.so");
    }
};

QTEST_GUILESS_MAIN(TestCudaPlugin)
#include "test_cuda_plugin.moc"

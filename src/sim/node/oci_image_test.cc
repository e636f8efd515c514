#include "sim/node/oci_image.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/subprocess.h"
#include "sim/node/node_image.h"

namespace hami::sim {
namespace {

namespace fs = std::filesystem;

class OciImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/oci_image_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Tar(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {FindOnPath("tar")};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = RunProcess(argv, {"PATH=/usr/bin:/bin", "LC_ALL=C"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  std::string dir_;
};

TEST_F(OciImageTest, GnuTarReadsWhatTheWriterWrites) {
  const std::string deep = std::string(60, 'd') + "/" + std::string(60, 'e') + "/" +
                           std::string(70, 'f');  // 192 bytes: needs the prefix field
  {
    TarWriter tar(dir_ + "/t.tar");
    ASSERT_TRUE(tar.status().ok());
    tar.AddDirectory("etc", 0755);
    tar.AddBytes("etc/motd", 0640, "hello\n");
    tar.AddSymlink("etc/link", "motd");
    tar.AddBytes(deep, 0600, std::string(1000, 'x'));  // crosses a block boundary
    ASSERT_TRUE(tar.Finish().ok());
  }
  std::string listing = Tar({"-tvf", dir_ + "/t.tar"});
  EXPECT_NE(listing.find("drwxr-xr-x root/root"), std::string::npos) << listing;
  EXPECT_NE(listing.find("-rw-r----- root/root         6 1970-01-01 00:00 etc/motd"),
            std::string::npos)
      << listing;
  EXPECT_NE(listing.find("etc/link -> motd"), std::string::npos) << listing;
  EXPECT_NE(listing.find(deep), std::string::npos) << listing;
  fs::create_directory(dir_ + "/x");
  Tar({"-xf", dir_ + "/t.tar", "-C", dir_ + "/x"});
  EXPECT_EQ(*ReadFileToString(dir_ + "/x/etc/motd"), "hello\n");
  EXPECT_EQ(ReadFileToString(dir_ + "/x/" + deep)->size(), 1000u);

  TarWriter too_long(dir_ + "/u.tar");
  too_long.AddBytes(std::string(300, 'n'), 0644, "");
  EXPECT_FALSE(too_long.Finish().ok()) << "a name no ustar header holds is refused";
}

TEST_F(OciImageTest, TheArchiveIsAnOciLayoutWhoseDigestsHold) {
  const std::string root = dir_ + "/rootfs";
  fs::create_directories(root + "/bin");
  ASSERT_TRUE(WriteFileAtomically(root + "/bin/tool", "#!/bin/sh\necho hi\n", 0755).ok());
  ASSERT_EQ(symlink("tool", (root + "/bin/alias").c_str()), 0);
  OciImage image{"localhost/test:v1", root, {"/bin/tool"}};
  ASSERT_TRUE(WriteOciArchive(image, dir_ + "/image.tar").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/image.tar.layer")) << "the staged layer is removed";

  fs::create_directory(dir_ + "/layout");
  Tar({"-xf", dir_ + "/image.tar", "-C", dir_ + "/layout"});
  auto index = nlohmann::json::parse(*ReadFileToString(dir_ + "/layout/index.json"));
  const auto& entry = index["manifests"][0];
  EXPECT_EQ(entry["annotations"]["io.containerd.image.name"], "localhost/test:v1");
  EXPECT_EQ(entry["annotations"]["org.opencontainers.image.ref.name"], "v1");
  // Every descriptor's digest is the SHA-256 of its blob, as sha256sum computes it.
  auto check = [&](const nlohmann::json& d) -> std::string {
    std::string digest = d["digest"];
    std::string blob = dir_ + "/layout/blobs/sha256/" + digest.substr(7);
    ProcessResult r = RunProcess({FindOnPath("sha256sum"), blob}, {"PATH=/usr/bin:/bin"});
    EXPECT_EQ(r.out.substr(0, 64), digest.substr(7));
    EXPECT_EQ(fs::file_size(blob), d["size"].get<uint64_t>());
    return blob;
  };
  auto manifest = nlohmann::json::parse(*ReadFileToString(check(entry)));
  auto config = nlohmann::json::parse(*ReadFileToString(check(manifest["config"])));
  EXPECT_EQ(config["config"]["Entrypoint"], nlohmann::json({"/bin/tool"}));
  EXPECT_EQ(config["rootfs"]["diff_ids"][0], manifest["layers"][0]["digest"]);
  std::string layer = check(manifest["layers"][0]);
  std::string files = Tar({"-tf", layer});
  EXPECT_EQ(files, "bin/\nbin/alias\nbin/tool\n");

  // The same folder gives the same image.
  ASSERT_TRUE(WriteOciArchive(image, dir_ + "/again.tar").ok());
  EXPECT_EQ(*ReadFileToString(dir_ + "/image.tar", 64 << 20),
            *ReadFileToString(dir_ + "/again.tar", 64 << 20));
  EXPECT_FALSE(WriteOciArchive({"localhost/test", root, {}}, dir_ + "/x.tar").ok())
      << "a name without a tag is refused";
  EXPECT_FALSE(WriteOciArchive({"localhost:5000/test", root, {}}, dir_ + "/x.tar").ok())
      << "a registry port is not a tag";
}

TEST(NodeImageTest, LddOutputGivesTheLibrariesWithTheLoader) {
  const std::string out =
      "\tlinux-vdso.so.1 (0x00007ffd5a9f2000)\n"
      "\tlibssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f0e4a000000)\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e49e1f000)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e4a2a5000)\n";
  EXPECT_EQ(ParseLddOutput(out),
            (std::vector<std::string>{"/lib/x86_64-linux-gnu/libssl.so.3",
                                      "/lib/x86_64-linux-gnu/libc.so.6",
                                      "/lib64/ld-linux-x86-64.so.2"}));
  EXPECT_TRUE(ParseLddOutput("\tstatically linked\n").empty());
}

}  // namespace
}  // namespace hami::sim

namespace hami::sim {
namespace {

// The node image from this build: every binary starts inside it (chroot, as root), with no
// library of the host but those it copied.
TEST(NodeImageTest, TheBuildsBinariesRunInsideTheAssembledImage) {
  ASSERT_EQ(geteuid(), 0u) << "chroot into the image needs root (the README's test command is "
                              "run as root)";
  char tmpl[] = "/tmp/node_image_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, rootfs = dir + "/rootfs";
  NodeImageSpec spec;
  spec.build_dir = HAMI_BUILD_DIR;
  spec.pause = std::string(HAMI_BUILD_DIR) + "/bin/hami-sim-pause";
  Status made = AssembleNodeRootfs(spec, rootfs);
  ASSERT_TRUE(made.ok()) << made.ToString();
  EXPECT_FALSE(AssembleNodeRootfs(spec, rootfs).ok()) << "an existing folder is refused";
  for (const char* f : {"/k8s-vgpu/lib/nvidia/libvgpu.so", "/pause", "/bin/sh", "/etc/passwd",
                        "/usr/lib64/ld-linux-x86-64.so.2"}) {
    EXPECT_TRUE(fs::exists(rootfs + f)) << f;
  }
  EXPECT_FALSE(fs::exists(rootfs + "/usr/lib/x86_64-linux-gnu/libcuda.so.1"))
      << "the driver comes from the node's container runtime, not the image";
  const std::string chroot = FindOnPath("chroot").empty() ? "/usr/sbin/chroot"
                                                          : FindOnPath("chroot");
  for (const char* bin : {"hami-scheduler", "hami-device-plugin", "hami-monitor", "hamictl"}) {
    ProcessResult r = RunProcess({chroot, rootfs, std::string("/usr/local/bin/") + bin, "--help"},
                                 {"PATH=/usr/local/bin:/bin"});
    EXPECT_EQ(r.exit_code, 0) << bin << ": " << r.err;
  }
  ProcessResult sh = RunProcess({chroot, rootfs, "/bin/sh", "-c", "ls /usr/local/bin | wc -l"},
                                {"PATH=/bin"});
  EXPECT_EQ(sh.exit_code, 0) << sh.err;
  EXPECT_EQ(sh.out, "5\n");
  Status archived = WriteOciArchive({"localhost/hami-cpp:node-test", rootfs, {"/pause"}},
                                    dir + "/image.tar");
  EXPECT_TRUE(archived.ok()) << archived.ToString();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hami::sim

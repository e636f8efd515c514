#include "ctl/verbs.h"

#include <unistd.h>

#include "ctl/demo.h"
#include "ctl/exit_codes.h"
#include "ctl/layout.h"
#include "ctl/region_ops.h"
#include "ctl/region_view.h"
#include "ctl/run.h"
#include "ctl/smi.h"

namespace hami::ctl {
namespace {

RegionPtr Attach(const std::string& verb, const std::string& path, std::ostream& err) {
  std::string why;
  RegionPtr r = AttachRegion(path, &why);
  if (r == nullptr) err << "hamictl: region " << verb << ": " << why << "\n";
  return r;
}

std::string PidList(const std::vector<int>& pids) {
  std::string out;
  for (int p : pids) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

}  // namespace

int RunVerb(const RunFlags& flags, std::ostream& err) {
  RunSpec spec;
  std::string why;
  if (!ValidateRunFlags(flags, &spec, &why)) {
    err << "hamictl: run: " << why << "\n";
    return kExitUsage;
  }
  Layout layout;
  if (!SelfLayout(&layout, &why)) {
    err << "hamictl: run: " << why << "\n";
    return kExitRunFailed;
  }
  return RunCommand(spec, layout, err);
}

int RegionShowVerb(const std::string& path, bool json, std::ostream& out, std::ostream& err) {
  RegionPtr r = Attach("show", path, err);
  if (r == nullptr) return kExitFailure;
  RegionView v = Snapshot(*r->header(), path);
  out << (json ? RenderRegionJson(v) : RenderRegionText(v));
  return kExitOk;
}

int RegionSuspendVerb(const std::string& path, int wait_ms, std::ostream& out, std::ostream& err) {
  if (wait_ms < 0) {
    err << "hamictl: region suspend: --wait-ms must not be negative\n";
    return kExitUsage;
  }
  RegionPtr r = Attach("suspend", path, err);
  if (r == nullptr) return kExitFailure;
  SuspendOutcome s = Suspend(*r, wait_ms);
  out << "suspend requested for " << path << " (" << s.live << " live process"
      << (s.live == 1 ? "" : "es") << ")\n";
  if (wait_ms == 0) return kExitOk;
  if (s.not_suspended.empty()) {
    out << "every live process is suspended\n";
    return kExitOk;
  }
  err << "hamictl: region suspend: after " << wait_ms << " ms, not suspended yet: pid "
      << PidList(s.not_suspended)
      << " (a process pauses at its next launch or allocation; the request stays set)\n";
  return kExitFailure;
}

int RegionResumeVerb(const std::string& path, std::ostream& out, std::ostream& err) {
  RegionPtr r = Attach("resume", path, err);
  if (r == nullptr) return kExitFailure;
  Resume(*r);
  out << "resumed " << path << "\n";
  return kExitOk;
}

int RegionSweepVerb(const std::string& path, std::ostream& out, std::ostream& err) {
  RegionPtr r = Attach("sweep", path, err);
  if (r == nullptr) return kExitFailure;
  std::vector<int> pids = Sweep(*r);
  out << "reclaimed " << pids.size() << " slot" << (pids.size() == 1 ? "" : "s")
      << (pids.empty() ? "" : " of exited pid " + PidList(pids)) << "\n";
  return kExitOk;
}

int RegionSetVerb(const std::string& path, const std::vector<std::string>& mem,
                  const std::vector<std::string>& cores, std::ostream& out, std::ostream& err) {
  std::vector<MemQuota> mq;
  std::vector<CoreQuota> cq;
  std::string why;
  for (const auto& m : mem) {
    MemQuota q;
    if (!ParseMemQuota("--mem", m, true, &q, &why)) {
      err << "hamictl: region set: " << why << "\n";
      return kExitUsage;
    }
    mq.push_back(q);
  }
  for (const auto& c : cores) {
    CoreQuota q;
    if (!ParseCoreQuota("--cores", c, true, &q, &why)) {
      err << "hamictl: region set: " << why << "\n";
      return kExitUsage;
    }
    cq.push_back(q);
  }
  if (mq.empty() && cq.empty()) {
    err << "hamictl: region set: nothing to change (give --mem IDX=SIZE and/or --cores IDX=PCT)\n";
    return kExitUsage;
  }
  RegionPtr r = Attach("set", path, err);
  if (r == nullptr) return kExitFailure;
  std::vector<std::string> notes;
  if (!SetQuotas(*r, mq, cq, &notes, &why)) {
    err << "hamictl: region set: " << why << "\n";
    return kExitUsage;
  }
  for (const auto& n : notes) err << "hamictl: note: " << n << "\n";
  out << "updated " << path << "\n";
  return kExitOk;
}

int SmiVerb(bool json, std::ostream& out, std::ostream& err) {
  SmiView v;
  std::string why;
  if (!CollectSmi(&v, &why)) {
    err << "hamictl: smi: " << why << "\n";
    return kExitFailure;
  }
  out << (json ? RenderSmiJson(v) : RenderSmiText(v));
  return kExitOk;
}

int DemoVerb(const std::string& build_dir, std::ostream& out, std::ostream& err) {
  Layout self;
  std::string why;
  if (!SelfLayout(&self, &why)) {
    err << "hamictl: demo: " << why << "\n";
    return kExitFailure;
  }
  if (!build_dir.empty()) {
    if (access(build_dir.c_str(), F_OK) != 0) {
      err << "hamictl: demo: --build-dir " << build_dir << " does not exist\n";
      return kExitUsage;
    }
    // The demo's `hamictl run` calls must use that build's libvgpu and simulator, which the
    // build's own hamictl finds next to itself.
    std::string hamictl = build_dir + "/bin/hamictl";
    self = LayoutAt(build_dir, access(hamictl.c_str(), X_OK) == 0 ? hamictl : self.hamictl);
  }
  return RunDemo(self, out, err);
}

}  // namespace hami::ctl

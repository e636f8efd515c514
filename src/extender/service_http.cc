// SchedulerService's HTTP face: the admission webhook, the metrics page and the routes (see
// service.h).
#include <functional>
#include <nlohmann/json.hpp>

#include "extender/k8s_objects.h"
#include "extender/metrics/scheduler_metrics.h"
#include "extender/service.h"
#include "extender/webhook/admission.h"
#include "k8s/object.h"
#include "net/http_server.h"

namespace hami::extender {

using scheduler::Ledger;

namespace {

// The webhook's view of node capacity, read from the node informer's cache on demand (only
// rules of vendors that need it ask: an Enflame vGCU container).
class InformerCapacityFacts final : public device::NodeCapacityFacts {
 public:
  explicit InformerCapacityFacts(const k8s::Informer* nodes) : nodes_(nodes) {}
  std::map<int64_t, int32_t> CapacityRatios(std::string_view numerator,
                                            std::string_view denominator) const override {
    std::map<int64_t, int32_t> out;
    if (nodes_ == nullptr) return out;
    for (const k8s::ObjectPtr& n : nodes_->List()) {
      int64_t num = NodeCapacityOf(*n, numerator);
      int64_t den = NodeCapacityOf(*n, denominator);
      if (num > 0 && den > 0) ++out[num / den];
    }
    return out;
  }

 private:
  const k8s::Informer* nodes_;
};

// The webhook's quota pre-check as a function (the service's reads the ledger under its shared
// lock only while checking).
class FunctionQuotaChecker final : public QuotaChecker {
 public:
  using Fn = std::function<Status(std::string_view, std::string_view, int64_t, int64_t)>;
  explicit FunctionQuotaChecker(Fn fn) : fn_(std::move(fn)) {}
  Status Check(std::string_view ns, std::string_view vendor, int64_t mem_mib,
               int64_t cores) const override {
    return fn_(ns, vendor, mem_mib, cores);
  }

 private:
  Fn fn_;
};

}  // namespace

Result<std::string> SchedulerService::Webhook(std::string_view body) {
  WebhookOptions opts;
  opts.scheduler_name = options_.scheduler_name;
  opts.force_overwrite_default_scheduler = options_.force_overwrite_default_scheduler;
  InformerCapacityFacts facts(nodes_.get());
  opts.node_facts = &facts;
  FunctionQuotaChecker quota(
      [this](std::string_view ns, std::string_view vendor, int64_t mem_mib, int64_t cores) {
        return cache_.Read([&](const Ledger& ledger) {
          MutexLock q(quota_mu_);
          return quota_.Check(ledger, ns, vendor, mem_mib, cores);
        });
      });
  return HandleAdmissionReview(body, vendors_, config_, opts, &quota);
}

namespace {

std::vector<CounterMetric> CountersOf(const ServiceStats& st) {
  return {
      {"hami_scheduler_filter_requests_total", "Filter calls from kube-scheduler", "", "",
       st.filters},
      {"hami_scheduler_filter_results_total", "Filter answers by result", "result", "fit",
       st.filter_fit},
      {"hami_scheduler_filter_results_total", "", "result", "no_fit", st.filter_no_fit},
      {"hami_scheduler_filter_results_total", "", "result", "error", st.filter_errors},
      {"hami_scheduler_filter_replaced_after_race_total",
       "Placements redone because the allocation view changed meanwhile", "", "",
       st.replaced_after_race},
      {"hami_scheduler_bind_requests_total", "Bind calls from kube-scheduler", "", "", st.binds},
      {"hami_scheduler_bind_errors_total", "Bind calls answered with an error", "", "",
       st.bind_errors},
      {"hami_scheduler_bind_busy_total",
       "Filter and bind calls refused because a bind of the pod was still running", "", "",
       st.bind_busy},
      {"hami_scheduler_bind_lock_waits_total",
       "Binds that waited for another allocation's node lock", "", "", st.lock_waits},
      {"hami_scheduler_binds_waiting",
       "Binds waiting for another allocation's node lock now (each waits up to "
       "--node-lock-retry-timeout)",
       "", "", st.binds_waiting, "gauge"},
      {"hami_scheduler_bind_unsettled_total", "Binds whose Binding outcome was unknown", "", "",
       st.bind_unsettled},
      {"hami_scheduler_bind_recovered_total", "Binds whose lost answer turned out to be a success",
       "", "", st.bind_recovered},
      {"hami_scheduler_node_lock_releases_total",
       "Node locks of finished holders their device plugin left behind", "stage", "queued",
       st.lock_releases_queued},
      {"hami_scheduler_node_lock_releases_total", "", "stage", "released", st.locks_released},
      {"hami_scheduler_pod_events_total", "Pod informer events handled", "", "", st.pod_events},
      {"hami_scheduler_stale_pod_events_total",
       "Pod events older than the scheduler's own write, ignored", "", "", st.stale_pod_events},
  };
}

}  // namespace

std::string SchedulerService::Metrics() {
  BuildInfo build;
  build.version = options_.version;
  build.compiler = "g++";
  build.platform = "linux";
  MetricsOptions mo;
  mo.legacy = options_.legacy_metrics;
  PendingPods pending;
  if (pods_ != nullptr) {
    for (const k8s::ObjectPtr& pod : pods_->List()) {
      if (k8s::GetString(*pod, "/spec/schedulerName") != options_.scheduler_name ||
          !k8s::GetString(*pod, "/spec/nodeName").empty() ||
          !k8s::GetString(*pod, "/metadata/deletionTimestamp").empty()) {
        continue;
      }
      ++pending[k8s::Namespace(*pod)];
    }
  }
  const std::vector<CounterMetric> counters = CountersOf(stats());
  return cache_.Read([&](const Ledger& ledger) {
    std::vector<QuotaMetric> quotas;
    {
      MutexLock q(quota_mu_);
      for (const QuotaUsageLine& l : quota_.Lines(ledger)) {
        quotas.push_back(QuotaMetric{l.ns, l.quota_name, l.resource, static_cast<double>(l.used),
                                     static_cast<double>(l.limit)});
      }
    }
    return RenderSchedulerMetrics(ledger, quotas, build, mo, pending, counters);
  });
}

void SchedulerService::RegisterRoutes(net::HttpServer& server) {
  server.Handle("POST", "/filter", [this](const net::HttpRequest& req, net::HttpResponse& res) {
    if (req.body.empty()) return res.SetText(400, "empty body\n");
    res.SetJson(200, Filter(req.body));
  });
  server.Handle("POST", "/bind", [this](const net::HttpRequest& req, net::HttpResponse& res) {
    if (req.body.empty()) return res.SetText(400, "empty body\n");
    // A bind that has to wait for a busy node answers later, from a binder thread: the HTTP
    // worker goes back to serving meanwhile.
    std::shared_ptr<net::Responder> responder = res.Defer();
    BindAsync(req.body, [responder](std::string answer) {
      net::HttpResponse r;
      r.SetJson(200, std::move(answer));
      responder->Send(std::move(r));
    });
  });
  server.Handle("POST", "/webhook", [this](const net::HttpRequest& req, net::HttpResponse& res) {
    if (req.body.empty()) return res.SetText(400, "empty body\n");
    Result<std::string> out = Webhook(req.body);
    if (!out.ok()) return res.SetText(400, out.status().message() + "\n");
    res.SetJson(200, std::move(*out));
  });
  server.AddReadinessCheck("scheduler", [this] { return Ready(); });
}

}  // namespace hami::extender

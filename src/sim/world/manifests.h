// The objects and files a simulated cluster is set up with, shared by the in-process cluster
// (src/sim/cluster) and the multi-process world (world.h): YAML manifests read as kubectl reads
// them, the chart's MutatingWebhookConfiguration for hami-scheduler, and the chart's
// KubeSchedulerConfiguration with hami-scheduler as extender.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "k8s/object.h"
#include "k8s/yaml_json.h"

namespace hami::sim {

// Converts YAML text (one document) into JSON the way kubectl does (k8s/yaml_json.h).
using k8s::YamlToJson;
// Splits a multi-document YAML file at "---" lines.
std::vector<std::string> SplitYamlDocuments(const std::string& text);

// The webhook the chart registers (`vgpu.hami.io`: pod CREATE, objects labelled
// hami.io/webhook=ignore excluded), calling `url` + "/webhook" and trusting `ca_pem`.
k8s::Object HamiWebhookConfiguration(const std::string& url, const std::string& ca_pem);

// A KubeSchedulerConfiguration with one profile `hami-scheduler` whose extender is `url`
// (filter and bind, HTTPS without verification when the URL is https, every NVIDIA resource
// ignored by the scheduler). `leader_election` is the YAML body of `leaderElection:`.
std::string KubeSchedulerConfigYaml(const std::string& url,
                                    const std::string& leader_election = "  leaderElect: false\n");

}  // namespace hami::sim

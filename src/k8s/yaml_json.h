// YAML read as JSON, the way kubectl reads a manifest: quoted scalars stay strings, plain scalars
// that read as integers, booleans or null become those. Used for manifests and for files other
// tools write in YAML (CDI specs).
//
// Thread safety: a pure function.
#pragma once

#include <string>

#include "common/status.h"
#include "k8s/object.h"

namespace hami::k8s {

// One YAML document (JSON is YAML too). InvalidArgument naming the parser's complaint.
Result<Object> YamlToJson(const std::string& yaml_document);

}  // namespace hami::k8s

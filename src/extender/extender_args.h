// ExtenderArgs, the body kube-scheduler POSTs to an extender's filter verb, read in one pass:
// `Pod` and `Nodes` become documents, while `NodeNames` (thousands of names on a large cluster)
// are copied into one buffer and handed out as views, without a JSON value, allocation or free
// per name. Accepts exactly the texts the full JSON parser accepts (same lexer); duplicate keys
// resolve as there (the last one wins). Member names match without regard to ASCII case, as Go's
// decoder matches them: kube-scheduler sends "Pod"/"NodeNames" (its types have no JSON tags),
// other clients "pod"/"nodenames".
//
//   HAMI_ASSIGN_OR_RETURN(ExtenderArgs args, ParseExtenderArgs(body));
//   if (args.pod.is_object()) ...;  for (std::string_view n : args.names) ...;
//
// Thread safety: plain value; the views point into the value's own buffer (not into `body`), so
// they stay valid as long as the ExtenderArgs does and moves keep them valid.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "k8s/object.h"

namespace hami::extender {

struct ExtenderArgs {
  k8s::Object pod;    // null when absent
  k8s::Object nodes;  // null when absent (the full-nodes simulation path uses it)
  // `nodenames`: absent or null -> has_names false; an array -> its string entries (other
  // entries are skipped); anything else -> names_not_list.
  bool has_names = false;
  bool names_not_list = false;
  std::vector<std::string_view> names;
  // The bytes `names` point into (heap-allocated, so moving the struct keeps the views valid).
  std::unique_ptr<std::string> name_buffer = std::make_unique<std::string>();
};

// DataLoss "malformed JSON" for a text the JSON parser rejects; InvalidArgument when the text is
// JSON but not an object.
Result<ExtenderArgs> ParseExtenderArgs(std::string_view body);

}  // namespace hami::extender

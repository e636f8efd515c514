#include "scheduler/extender_args.h"

#include <cstdint>
#include <utility>

namespace hami::scheduler {
namespace {

using Json = nlohmann::json;

// Builds one JSON value from SAX events, the way the DOM parser does (duplicate keys: last wins).
class DomBuilder {
 public:
  explicit DomBuilder(Json* root) : root_(root) {}

  void Value(Json v) { Place(std::move(v)); }
  void Key(std::string k) { key_ = std::move(k); }
  void StartObject() { stack_.push_back(Place(Json::object())); }
  void StartArray() { stack_.push_back(Place(Json::array())); }
  void End() { stack_.pop_back(); }

 private:
  Json* Place(Json v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    Json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    Json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }

  Json* root_;
  std::vector<Json*> stack_;
  std::string key_;
};

class ArgsReader : public nlohmann::json_sax<Json> {
 public:
  explicit ArgsReader(ExtenderArgs* out) : out_(out) {}

  bool null() override { return Scalar(Json(nullptr)); }
  bool boolean(bool b) override { return Scalar(Json(b)); }
  bool number_integer(number_integer_t v) override { return Scalar(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Scalar(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Scalar(Json(v)); }
  bool binary(binary_t& b) override { return Scalar(Json(b)); }
  bool string(string_t& s) override {
    if (mode_ == Mode::kNames && depth_ == 2) {
      spans_.emplace_back(static_cast<uint32_t>(buffer_.size()), static_cast<uint32_t>(s.size()));
      buffer_.append(s);
      return true;
    }
    return Scalar(Json(s));
  }

  bool start_object(std::size_t) override {
    if (depth_ == 0) top_is_object_ = true;
    if (depth_ == 1) Begin(/*container=*/true, /*array=*/false);
    if (mode_ == Mode::kDom) builder_->StartObject();
    ++depth_;
    return true;
  }
  bool end_object() override { return EndContainer(); }
  bool start_array(std::size_t) override {
    if (depth_ == 1) Begin(/*container=*/true, /*array=*/true);
    if (mode_ == Mode::kDom) builder_->StartArray();
    ++depth_;
    return true;
  }
  bool end_array() override { return EndContainer(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      key_ = k;
    } else if (mode_ == Mode::kDom) {
      builder_->Key(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool top_is_object() const { return top_is_object_; }
  std::vector<std::pair<uint32_t, uint32_t>>& spans() { return spans_; }
  std::string& buffer() { return buffer_; }

 private:
  enum class Mode { kSkip, kDom, kNames };

  // A top-level member's value starts: decide how to read it.
  void Begin(bool container, bool array) {
    mode_ = Mode::kSkip;
    if (key_ == "pod" || key_ == "nodes") {
      Json& target = key_ == "pod" ? out_->pod : out_->nodes;
      target = Json();
      builder_ = std::make_unique<DomBuilder>(&target);
      mode_ = Mode::kDom;
    } else if (key_ == "nodenames") {
      // A later "nodenames" replaces an earlier one.
      spans_.clear();
      buffer_.clear();
      out_->has_names = false;
      out_->names_not_list = false;
      if (array) {
        out_->has_names = true;
        mode_ = Mode::kNames;
      } else if (container) {
        out_->names_not_list = true;
      }
    }
  }

  bool Scalar(Json v) {
    if (depth_ == 1) {
      Begin(/*container=*/false, /*array=*/false);
      if (key_ == "nodenames" && !v.is_null()) out_->names_not_list = true;
    }
    if (mode_ == Mode::kDom) builder_->Value(std::move(v));
    if (depth_ == 1) mode_ = Mode::kSkip;
    return true;
  }

  bool EndContainer() {
    --depth_;
    if (mode_ == Mode::kDom) builder_->End();
    if (depth_ == 1) mode_ = Mode::kSkip;
    return true;
  }

  ExtenderArgs* out_;
  int depth_ = 0;
  bool top_is_object_ = false;
  std::string key_;
  Mode mode_ = Mode::kSkip;
  std::unique_ptr<DomBuilder> builder_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
  std::string buffer_;
};

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  ExtenderArgs args;
  ArgsReader reader(&args);
  bool ok = Json::sax_parse(body.begin(), body.end(), &reader, Json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (!ok) return DataLossError("malformed JSON");
  if (!reader.top_is_object()) return InvalidArgumentError("wrong type");
  *args.name_buffer = std::move(reader.buffer());
  const std::string& buf = *args.name_buffer;
  args.names.reserve(reader.spans().size());
  for (const auto& [offset, length] : reader.spans()) {
    args.names.emplace_back(buf.data() + offset, length);
  }
  return args;
}

}  // namespace hami::scheduler

// Copyright 2026 The dtensor Authors.
#include <dtensor/checkpoint/safetensors.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <utility>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <dtensor/base/check.h>
#include <dtensor/checkpoint/files.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data are little-endian; big-endian hosts are not supported");

namespace dtensor::checkpoint {
namespace {

// The reference implementation's limit on a header's size.
constexpr int64_t kMaxHeaderBytes = 100'000'000;
// What a reader reads first: the header length and, when it fits, the
// header (that of a file of a few dozen tensors does).
constexpr int64_t kFirstReadBytes = 4 << 10;

// The bytes the calling thread has read through SafetensorsReader::read.
thread_local int64_t thread_bytes_read = 0;

const std::vector<std::pair<const char*, c10::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<const char*, c10::ScalarType>> names = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
      {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
      {"U8", at::kByte},    {"BOOL", at::kBool}};
  return names;
}

std::string known_dtype_names() {
  std::string known;
  for (const auto& [name, dtype] : dtype_names())
    known += (known.empty() ? "" : ", ") + std::string(name);
  return known;
}

std::string errno_text() { return std::strerror(errno); }

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (const int64_t size : shape) numel *= size;
  return numel;
}

// The little-endian bytes of `value`.
std::string little_endian_u64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

// Reads an entry's shape from the header, refusing anything but a list of
// sizes >= 0.
std::vector<int64_t> parse_shape(const nlohmann::json& shape, const std::string& where) {
  DTENSOR_CHECK(shape.is_array(), where, ": \"shape\": expected a list of sizes, found ",
                shape.dump());
  std::vector<int64_t> sizes;
  for (const nlohmann::json& size : shape) {
    DTENSOR_CHECK(size.is_number_integer() && size.get<int64_t>() >= 0, where,
                  ": \"shape\": expected sizes >= 0, found ", shape.dump());
    sizes.push_back(size.get<int64_t>());
  }
  return sizes;
}

// Reads one tensor's header entry and checks its byte range against the
// data section's `data_size` bytes and its shape and dtype.
SafetensorsEntry parse_entry(const nlohmann::json& value, const std::string& where,
                             int64_t data_size) {
  DTENSOR_CHECK(value.is_object() && value.contains("dtype") && value.contains("shape") &&
                    value.contains("data_offsets"),
                where,
                ": expected an object with \"dtype\", \"shape\" and \"data_offsets\", found ",
                value.dump());
  DTENSOR_CHECK(value["dtype"].is_string(), where, ": \"dtype\": expected a string, found ",
                value["dtype"].dump());
  SafetensorsEntry entry;
  try {
    entry.dtype = safetensors_dtype(value["dtype"].get<std::string>());
  } catch (const Error& error) {
    DTENSOR_CHECK(false, where, ": ", error.what());
  }
  entry.shape = parse_shape(value["shape"], where);
  const nlohmann::json& offsets = value["data_offsets"];
  DTENSOR_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_integer() &&
                    offsets[1].is_number_integer(),
                where, ": \"data_offsets\": expected [begin, end], found ", offsets.dump());
  entry.begin = offsets[0].get<int64_t>();
  entry.end = offsets[1].get<int64_t>();
  DTENSOR_CHECK(0 <= entry.begin && entry.begin <= entry.end && entry.end <= data_size, where,
                ": \"data_offsets\": expected 0 <= begin <= end <= ", data_size,
                " (the data section's size), found [", entry.begin, ", ", entry.end, "]");
  const int64_t expected =
      numel_of(entry.shape) * static_cast<int64_t>(c10::elementSize(entry.dtype));
  DTENSOR_CHECK(entry.end - entry.begin == expected, where, ": \"data_offsets\" span ",
                entry.end - entry.begin, " bytes; shape ", value["shape"].dump(), " of ",
                value["dtype"].get<std::string>(), " needs ", expected);
  return entry;
}

}  // namespace

std::string safetensors_dtype_name(c10::ScalarType dtype) {
  for (const auto& [name, known] : dtype_names()) {
    if (known == dtype) return name;
  }
  DTENSOR_CHECK(false, "safetensors: dtype ", dtype, " has no safetensors name; expected one of ",
                known_dtype_names());
  return {};
}

c10::ScalarType safetensors_dtype(const std::string& name) {
  for (const auto& [known, dtype] : dtype_names()) {
    if (name == known) return dtype;
  }
  DTENSOR_CHECK(false, "safetensors: unknown dtype \"", name, "\"; expected one of ",
                known_dtype_names());
  return at::kFloat;
}

namespace {

// A reader's pread copies from the page cache at the tensor's file offset
// into memory aligned to at least this; a source off that alignment copies
// about 1.5x slower (measured: 64 MiB from the page cache, 7.6 ms at offset
// 0 or 64, 12 ms at offset 88). The format allows no holes between tensors,
// so the data section starts aligned and the tensors whose sizes keep the
// alignment come first.
constexpr int64_t kDataAlignment = 64;

int64_t byte_size(const at::Tensor& tensor) { return tensor.numel() * tensor.element_size(); }

// The order the data section holds `tensors` in: those whose sizes are
// multiples of kDataAlignment (all start aligned), then the rest by element
// size, largest first (each starts at a multiple of its element size, as
// the reference writer keeps them); otherwise in the order given.
std::vector<size_t> data_order(const std::vector<at::Tensor>& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  const auto rest = std::stable_partition(order.begin(), order.end(), [&](size_t i) {
    return byte_size(tensors[i]) % kDataAlignment == 0;
  });
  std::stable_sort(rest, order.end(), [&](size_t a, size_t b) {
    return tensors[a].element_size() > tensors[b].element_size();
  });
  return order;
}

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> contiguous;
  for (const auto& [name, tensor] : tensors) {
    DTENSOR_CHECK(name != "__metadata__" && !header.contains(name), "write_safetensors: ", path,
                  ": tensor name \"", name, "\" is reserved or repeated");
    contiguous.push_back(tensor.detach().to(at::kCPU).contiguous());
    header[name] = nullptr;
  }
  const std::vector<size_t> order = data_order(contiguous);
  int64_t offset = 0;
  for (size_t i : order) {
    const int64_t bytes = byte_size(contiguous[i]);
    header[tensors[i].first] = {{"dtype", safetensors_dtype_name(contiguous[i].scalar_type())},
                                {"shape", contiguous[i].sizes().vec()},
                                {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  // Spaces after the JSON (the format's padding) make 8 + its length, where
  // the data section starts, a multiple of kDataAlignment (so of 8, as the
  // reference writer pads).
  std::string text = header.dump();
  const int64_t end = 8 + static_cast<int64_t>(text.size());
  text.append(static_cast<size_t>((kDataAlignment - end % kDataAlignment) % kDataAlignment), ' ');
  const std::string prefix = little_endian_u64(text.size()) + text;

  OutputFile file(path);
  file.write(prefix.data(), static_cast<int64_t>(prefix.size()));
  for (size_t i : order) file.write(contiguous[i].data_ptr(), byte_size(contiguous[i]));
  file.close();
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DTENSOR_CHECK(fd_ >= 0, "safetensors: cannot open ", path, ": ", errno_text());
  try {
    struct stat status {};
    DTENSOR_CHECK(::fstat(fd_, &status) == 0, "safetensors: ", path, ": ", errno_text());
    const int64_t file_size = status.st_size;
    DTENSOR_CHECK(file_size >= 8, "safetensors: ", path,
                  ": expected at least the 8-byte header length, found a file of ", file_size,
                  " bytes");
    // The length and, when it is short, the header in one read; a longer
    // header is read after it.
    std::string head(static_cast<size_t>(std::min(file_size, kFirstReadBytes)), '\0');
    const int64_t got = read_at(fd_, head.data(), static_cast<int64_t>(head.size()), 0);
    DTENSOR_CHECK(got >= 8, "safetensors: ", path,
                  ": reading the header length: ", got < 0 ? errno_text() : "the file ended");
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(head[i]);
    DTENSOR_CHECK(length <= static_cast<uint64_t>(std::min(file_size - 8, kMaxHeaderBytes)),
                  "safetensors: ", path, ": header length ", length,
                  " runs past the end of the file (", file_size - 8,
                  " bytes after the length; at most ", kMaxHeaderBytes, ")");
    const bool read_whole = 8 + length <= static_cast<uint64_t>(got);
    std::string rest;
    if (!read_whole) {
      rest.resize(length);
      const int64_t read = read_at(fd_, rest.data(), static_cast<int64_t>(length), 8);
      DTENSOR_CHECK(read == static_cast<int64_t>(length), "safetensors: ", path,
                    ": reading the header: ", read < 0 ? errno_text() : "the file ended");
    }
    data_start_ = 8 + static_cast<int64_t>(length);
    parse_header(read_whole ? std::string_view(head).substr(8, length) : std::string_view(rest),
                 file_size - data_start_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      entries_(std::move(other.entries_)),
      metadata_(std::move(other.metadata_)) {}

void SafetensorsReader::parse_header(std::string_view header, int64_t data_size) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(header.begin(), header.end());
  } catch (const nlohmann::json::exception& error) {
    DTENSOR_CHECK(false, "safetensors: ", path_, ": the header is not valid JSON: ", error.what());
  }
  DTENSOR_CHECK(json.is_object(), "safetensors: ", path_,
                ": expected the header to be a JSON object, found ", json.type_name());
  for (const auto& [name, value] : json.items()) {
    const std::string where = "safetensors: " + path_ + ": tensor \"" + name + "\"";
    if (name == "__metadata__") {
      DTENSOR_CHECK(value.is_object(), "safetensors: ", path_,
                    ": \"__metadata__\": expected an object, found ", value.dump());
      for (const auto& [key, text] : value.items()) {
        DTENSOR_CHECK(text.is_string(), "safetensors: ", path_, ": \"__metadata__\": \"", key,
                      "\": expected a string, found ", text.dump());
        metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    entries_.emplace(name, parse_entry(value, where, data_size));
  }
  // No two tensors' bytes overlap.
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> by_begin;
  for (const auto& [name, entry] : entries_) {
    if (entry.end > entry.begin) by_begin.emplace_back(&name, &entry);
  }
  std::sort(by_begin.begin(), by_begin.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    DTENSOR_CHECK(by_begin[i - 1].second->end <= by_begin[i].second->begin, "safetensors: ", path_,
                  ": tensors \"", *by_begin[i - 1].first, "\" [", by_begin[i - 1].second->begin,
                  ", ", by_begin[i - 1].second->end, ") and \"", *by_begin[i].first, "\" [",
                  by_begin[i].second->begin, ", ", by_begin[i].second->end, ") overlap");
  }
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const auto found = entries_.find(name);
  DTENSOR_CHECK(found != entries_.end(), "safetensors: ", path_, ": no tensor \"", name, "\"");
  return found->second;
}

void SafetensorsReader::read(const SafetensorsEntry& entry, int64_t offset, int64_t size,
                             void* destination) const {
  DTENSOR_CHECK(offset >= 0 && size >= 0 && offset + size <= entry.end - entry.begin,
                "safetensors: ", path_, ": read of bytes [", offset, ", ", offset + size,
                ") of a tensor of ", entry.end - entry.begin, " bytes");
  const int64_t position = data_start_ + entry.begin + offset;
  thread_bytes_read += size;
  const int64_t got = read_at(fd_, destination, size, position);
  DTENSOR_CHECK(got == size, "safetensors: ", path_, ": reading ", size, " bytes at ", position,
                ": ", got < 0 ? errno_text() : "unexpected end of file");
}

ReadCounter::ReadCounter() : start_(thread_bytes_read) {}

int64_t ReadCounter::bytes() const { return thread_bytes_read - start_; }

}  // namespace dtensor::checkpoint

// OrderedDict: an insertion-ordered map from keys to values, as torch::OrderedDict. Modules keep
// their parameters, buffers and children in one; state_dict() and safetensors::load() return one.
// Invariants: keys are unique; iteration follows insertion order; lookups are O(1) on average;
// erase keeps the order of the remaining items.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/core/error.h"

namespace ferry::nn {

template <typename Key, typename Value>
class OrderedDict {
 public:
  class Item {
   public:
    Item(Key key, Value value) : pair_(std::move(key), std::move(value)) {}
    const Key& key() const { return pair_.first; }
    Value& value() { return pair_.second; }
    const Value& value() const { return pair_.second; }
    Value& operator*() { return value(); }
    const Value& operator*() const { return value(); }
    Value* operator->() { return &value(); }
    const Value* operator->() const { return &value(); }
    const std::pair<Key, Value>& pair() const { return pair_; }

   private:
    std::pair<Key, Value> pair_;
  };

  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  // `key_description` names the keys in error messages ("Key", "Parameter", ...).
  explicit OrderedDict(std::string key_description = "Key")
      : key_description_(std::move(key_description)) {}

  // Adds a new item; raises ferry::Error when the key is already present.
  Value& insert(Key key, Value value) {
    FERRY_CHECK(index_.count(key) == 0, key_description_, " '", key, "' already defined");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().value();
  }
  // Adds the item, or replaces the value of an existing key (keeping its position).
  Value& insert_or_assign(Key key, Value value) {
    if (Value* existing = find(key)) {
      *existing = std::move(value);
      return *existing;
    }
    return insert(std::move(key), std::move(value));
  }

  Value* find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].value();
  }
  const Value* find(const Key& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].value();
  }
  bool contains(const Key& key) const { return index_.count(key) != 0; }

  // Raises ferry::Error naming the key when it is absent.
  Value& operator[](const Key& key) {
    Value* v = find(key);
    FERRY_CHECK(v != nullptr, key_description_, " '", key, "' is not defined");
    return *v;
  }
  const Value& operator[](const Key& key) const {
    const Value* v = find(key);
    FERRY_CHECK(v != nullptr, key_description_, " '", key, "' is not defined");
    return *v;
  }
  Item& operator[](size_t index) {
    FERRY_CHECK(index < items_.size(), "OrderedDict: index ", index, " is out of range (size ",
                items_.size(), ")");
    return items_[index];
  }
  const Item& operator[](size_t index) const {
    FERRY_CHECK(index < items_.size(), "OrderedDict: index ", index, " is out of range (size ",
                items_.size(), ")");
    return items_[index];
  }

  // Removes the key (O(size)); returns whether it was present.
  bool erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    const size_t at = it->second;
    index_.erase(it);
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(at));
    for (size_t i = at; i < items_.size(); ++i) index_[items_[i].key()] = i;
    return true;
  }
  void clear() {
    items_.clear();
    index_.clear();
  }
  void reserve(size_t n) {
    items_.reserve(n);
    index_.reserve(n);
  }

  size_t size() const { return items_.size(); }
  bool is_empty() const { return items_.empty(); }
  bool empty() const { return items_.empty(); }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

  std::vector<Key> keys() const {
    std::vector<Key> out;
    out.reserve(items_.size());
    for (const Item& item : items_) out.push_back(item.key());
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    out.reserve(items_.size());
    for (const Item& item : items_) out.push_back(item.value());
    return out;
  }

 private:
  std::string key_description_;
  std::vector<Item> items_;
  std::unordered_map<Key, size_t> index_;
};

}  // namespace ferry::nn

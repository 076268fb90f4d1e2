// Weak references in IntrusivePtr: lock() while a strong handle exists, expiry after, the
// object's resources released when the last strong handle goes and its memory when the last
// weak one does (checked under ASan in CI); concurrent lock and release.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ferry/core/intrusive_ptr.h"

namespace ferry {
namespace {

struct Tracked : RefCounted {
  explicit Tracked(std::atomic<int>* released, std::atomic<int>* destroyed)
      : released_(released), destroyed_(destroyed) {}
  ~Tracked() override { destroyed_->fetch_add(1); }
  void release_resources() override { released_->fetch_add(1); }
  std::atomic<int>* released_;
  std::atomic<int>* destroyed_;
  int value = 42;
};

TEST(WeakIntrusivePtr, LocksWhileAliveAndExpiresAfter) {
  std::atomic<int> released{0}, destroyed{0};
  WeakIntrusivePtr<Tracked> weak;
  {
    IntrusivePtr<Tracked> strong = make_intrusive<Tracked>(&released, &destroyed);
    weak = WeakIntrusivePtr<Tracked>(strong);
    EXPECT_EQ(strong->weak_use_count(), 1);
    IntrusivePtr<Tracked> again = weak.lock();
    ASSERT_TRUE(again);
    EXPECT_EQ(again->value, 42);
    EXPECT_EQ(strong.use_count(), 2);
    EXPECT_FALSE(weak.expired());
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(weak.lock());
  EXPECT_EQ(released.load(), 1);
  EXPECT_EQ(destroyed.load(), 0);  // the weak handle still pins the memory
  weak.reset();
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(WeakIntrusivePtr, WithoutWeakHandlesTheObjectGoesAtOnce) {
  std::atomic<int> released{0}, destroyed{0};
  { IntrusivePtr<Tracked> strong = make_intrusive<Tracked>(&released, &destroyed); }
  EXPECT_EQ(destroyed.load(), 1);
  EXPECT_EQ(released.load(), 0);  // the fast path deletes directly
}

TEST(WeakIntrusivePtr, ConcurrentLocksNeverResurrect) {
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> released{0}, destroyed{0};
    IntrusivePtr<Tracked> strong = make_intrusive<Tracked>(&released, &destroyed);
    WeakIntrusivePtr<Tracked> weak(strong);
    std::atomic<int> bad{0};
    std::thread locker([&] {
      for (int i = 0; i < 100; ++i) {
        if (IntrusivePtr<Tracked> p = weak.lock(); p && p->value != 42) bad.fetch_add(1);
      }
    });
    strong.reset();
    locker.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(released.load(), 1);
    weak.reset();
    EXPECT_EQ(destroyed.load(), 1);
  }
}

}  // namespace
}  // namespace ferry

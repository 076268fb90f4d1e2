// The copy_stub's table; backends fill it when the library loads.
#include "ferry/iter/copy_stub.h"

namespace ferry {

FERRY_DEFINE_DISPATCH(copy_stub);

}  // namespace ferry

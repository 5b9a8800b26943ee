#include "common/status.h"

#include <gtest/gtest.h>

namespace flightrec {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  *out = q;
  return OkStatus();
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status st = Quarter(6, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "odd");
}

TEST(StatusTest, EnospcSaysNoSpace) {
  Status st = ErrnoStatus(ENOSPC, "writing record x");
  EXPECT_EQ(st.code(), StatusCode::kNoSpace);
  EXPECT_NE(st.message().find("no space"), std::string::npos);
  EXPECT_EQ(st.err(), ENOSPC);
}

TEST(StatusTest, AnnotatePrefixesContext) {
  Status st = NotFound("no such record").Annotate("recorder info abc");
  EXPECT_EQ(st.message(), "recorder info abc: no such record");
  EXPECT_TRUE(OkStatus().Annotate("x").ok());
}

}  // namespace
}  // namespace flightrec

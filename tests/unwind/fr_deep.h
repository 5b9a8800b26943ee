// fr_deep: the chain of 20 functions (see fr_deep.c).
#pragma once

long fr_deep_e01(long n);
long fr_deep_e02(long n);
long fr_deep_e03(long n);
long fr_deep_e04(long n);
long fr_deep_e05(long n);
long fr_deep_e06(long n);
long fr_deep_e07(long n);
long fr_deep_e08(long n);
long fr_deep_e09(long n);
long fr_deep_e10(long n);
long fr_deep_l11(long n);
long fr_deep_l12(long n);
long fr_deep_l13(long n);
long fr_deep_l14(long n);
long fr_deep_l15(long n);
long fr_deep_l16(long n);
long fr_deep_l17(long n);
long fr_deep_l18(long n);
long fr_deep_l19(long n);
long fr_deep_hot(long n);

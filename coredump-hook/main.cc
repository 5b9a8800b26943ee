#include "coredump-hook/coredump.h"

int main(int argc, char** argv) { return flightrec::coredump::CoredumpMain(argc, argv); }

// Anchor of the precompiled header that every test binary reuses (CMakeLists.txt,
// cairn_test_pch): the headers themselves are listed there.

# Writes OUT, a C++ file defining `const char* const NAME` as the text of IN (cmake -P).
file(READ "${IN}" content)
file(WRITE "${OUT}" "// Generated from ${IN} by embed_text.cmake.\n"
  "#include \"sim/report/timeline_page_script.hpp\"\n\n"
  "namespace allocsim {\n\nconst char* const ${NAME} = R\"embedded_js(${content})embedded_js\";\n\n}  // namespace allocsim\n")

# Writes OUT, a C++ file defining `const char* const NAME` (declared in HEADER) as the text of IN
# (cmake -P).
file(READ "${IN}" content)
file(WRITE "${OUT}" "// Generated from ${IN} by embed_text.cmake.\n"
  "#include \"${HEADER}\"\n\n"
  "namespace allocsim {\n\nconst char* const ${NAME} = R\"embedded_text(${content})embedded_text\";\n\n}  // namespace allocsim\n")

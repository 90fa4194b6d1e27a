// `gradkern tokenize`: text to BPE token ids and back (tools/tokenize.c).
#ifndef GK_TOOLS_TOKENIZE_H
#define GK_TOOLS_TOKENIZE_H

// argv[0] is the first option. Returns the process exit status.
int gk_cmd_tokenize(int argc, char **argv);

#endif

#ifndef GK_PLOT_CMD_H
#define GK_PLOT_CMD_H
// gradkern plot: series from files to an SVG line plot (tools/plot_cmd.c).
int gk_cmd_plot(int argc, char **argv);
#endif

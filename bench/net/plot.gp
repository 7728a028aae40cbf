# run.sh's plot: node-mean test accuracy (every evaluation measures it) against wall time, one panel per uplink rate.
# gnuplot -c plot.gp OUT "RATES" "SKEWS" (OUT holds RATE-CONFIG-POLICY-skewS.csv logs)
out = ARG1
rates = ARG2
skews = ARG3
set terminal pngcairo size 1600,900
set output out."/accuracy-vs-time.png"
set datafile separator ','
n = words(rates)
set multiplot layout 1,n title "node-mean test accuracy against wall time (testbed)"
set xlabel 'wall seconds'
set ylabel 'test accuracy'
set key bottom right font ",8"
set yrange [*:*]
do for [i=1:n] {
  rate = word(rates, i)
  set title (rate eq "none" ? "unshaped" : rate)
  files = system("cd '".out."' && ls ".rate."-*.csv 2>/dev/null")
  plot for [f in files] out."/".f using 11:5 skip 1 with linespoints title substr(f, strlen(rate) + 2, strlen(f) - 4)
}
unset multiplot

// Spins for argv[2] ms in two JS functions with known names, for the test
// of JIT maps (node --perf-basic-prof writes /tmp/perf-PID.map).
function namedJsLeafGamma(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += (i * 7) ^ (s >>> 3);
  return s;
}
function namedJsOuterAlpha(ms) {
  const end = Date.now() + ms;
  let t = 0;
  while (Date.now() < end) t += namedJsLeafGamma(100000);
  return t;
}
console.log(namedJsOuterAlpha(parseInt(process.argv[2] || "2000", 10)));

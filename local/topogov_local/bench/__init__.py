"""The benchmarks behind ``topogov bench`` (``make bench``), one module each: reconcile passes,
governor passes and API latency against a local stack (:mod:`.reconcile`), admission cycles and
Kueue's performance shapes on the model (:mod:`.admission`), the api function's cold start
(:mod:`.coldstart`), start estimates (:mod:`.estimate`), placement costs (:mod:`.placement`) and the
side-by-side replay of Topogov's decisions against plain Kueue (:mod:`.policies`). Benchmarks time
and count; tests assert (none of them is a timed test)."""

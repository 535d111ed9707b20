"""What the pages share, so that pages/ holds only pages: the session's scenario (state), widgets bound to its
fields (binding), the address bar and the link a session opens with (links), the store and cached engine calls
(cached), text made safe for markdown, plotly and CSV (escape), drawn pieces several pages show (components,
sidebar, answer), chart settings (charts), field labels (fields), the deployment's settings (settings), bounded
and background work (work_limits, background). ui may import engine and benchmarks_db; neither imports ui."""

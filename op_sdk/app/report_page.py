"""Renders a compile's fusion report as a self-contained HTML page (inline SVG pictures,
no scripts, no network) and as Markdown with Mermaid diagrams.

Input is plain data (see ``op_sdk.compiler.explain.report_data``):
``{"title", "facts": {k: v}, "fusions": [rows], "regions": [region], "near_misses": [..],
"dumps": [{"name", "text"}], "streams": [{"graph", "execution", "nodes": {node: stream}}],
"scopes": [{"graph", "regions": {region: [node]}}],
"trace": {"path", "threads": {tid: {"streams", "ops", "busy_us"}}, "overlap_us"} or None}`` where a region is ``{"fusion", "variant", "before": graph,
"after": graph}`` and a graph is ``{"nodes": [{"id", "label", "kind"}], "edges": [[src, dst]]}``
with kind one of "input", "op", "fused", "output".
"""  # noqa: E501

from __future__ import annotations

import html

_COLORS = {"input": "#eef2f7", "op": "#fde2cf", "fused": "#cdeccd", "output": "#eef2f7",
           "view": "#f4f4f4"}
_BOX_W, _BOX_H, _GAP_X, _GAP_Y = 240, 34, 24, 46


def _layers(graph: dict) -> list[list[str]]:
    """Longest-path layering of a small DAG (inputs on top)."""
    ids = [n["id"] for n in graph["nodes"]]
    preds = {i: [] for i in ids}
    for a, b in graph["edges"]:
        if a in preds and b in preds:
            preds[b].append(a)
    depth: dict[str, int] = {}

    def d(i, seen=()):
        if i not in depth:
            depth[i] = 0 if not preds[i] or i in seen else 1 + max(d(p, seen + (i,)) for p in preds[i])
        return depth[i]

    for i in ids:
        d(i)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for i in ids:
        layers[depth[i]].append(i)
    return layers


def graphviz_svg(graph: dict, title: str = "") -> str | None:
    """The picture laid out by Graphviz (``dot``: layered, edges routed around the boxes),
    each node its operator over its source line, coloured by kind; None where the
    ``graphviz`` package or its ``dot`` program is missing."""
    try:
        import graphviz
    except ImportError:
        return None
    g = graphviz.Digraph(graph_attr={"rankdir": "TB", "splines": "spline", "nodesep": "0.25",
                                     "ranksep": "0.35", "fontname": "sans-serif",
                                     "fontsize": "12", "labelloc": "t", "label": title},
                         node_attr={"shape": "box", "style": "rounded,filled",
                                    "fontname": "monospace", "fontsize": "10",
                                    "color": "#666666", "margin": "0.12,0.04"},
                         edge_attr={"color": "#555555", "arrowsize": "0.6"})
    # Graphviz reads "a:b" as node a, port b: the nodes get plain ids
    key = {n["id"]: f"n{k}" for k, n in enumerate(graph["nodes"])}
    for n in graph["nodes"]:
        kind = n.get("kind", "op")
        label = html.escape(n.get("label", n["id"]))
        if n.get("source"):
            label += f'<BR/><FONT POINT-SIZE="8" COLOR="#555555">{html.escape(n["source"])}</FONT>'
        g.node(key[n["id"]], label=f"<{label}>", fillcolor=_COLORS.get(kind, _COLORS["op"]),
               **({"style": "rounded,filled,dashed"} if kind == "view" else {}),
               **({"shape": "ellipse"} if kind in ("input", "output") else {}))
    for a, b in graph["edges"]:
        if a in key and b in key:
            g.edge(key[a], key[b])
    try:
        svg = g.pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError):
        return None
    return svg[svg.index("<svg"):]  # inline: no XML declaration or doctype


def svg_graph(graph: dict, title: str = "") -> str:
    """An SVG picture of a small graph: laid out by Graphviz where it is installed
    (``graphviz_svg``), else boxes in longest-path layers with straight arrows."""
    laid_out = graphviz_svg(graph, title)
    if laid_out is not None:
        return laid_out
    layers = _layers(graph)
    labels = {n["id"]: n for n in graph["nodes"]}
    width = max((len(layer) for layer in layers), default=1) * (_BOX_W + _GAP_X) + _GAP_X
    height = len(layers) * (_BOX_H + _GAP_Y) + _GAP_Y + (18 if title else 0)
    top = 18 if title else 0
    pos = {}
    for y, layer in enumerate(layers):
        row_w = len(layer) * (_BOX_W + _GAP_X) - _GAP_X
        x0 = (width - row_w) / 2
        for x, i in enumerate(layer):
            pos[i] = (x0 + x * (_BOX_W + _GAP_X), top + _GAP_Y / 2 + y * (_BOX_H + _GAP_Y))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" role="img">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
           'fill="#555"/></marker></defs>']
    if title:
        out.append(f'<text x="6" y="13" font-size="12" font-family="sans-serif" '
                   f'font-weight="bold">{html.escape(title)}</text>')
    for a, b in graph["edges"]:
        if a in pos and b in pos:
            (xa, ya), (xb, yb) = pos[a], pos[b]
            out.append(f'<line x1="{xa + _BOX_W / 2:.1f}" y1="{ya + _BOX_H:.1f}" '
                       f'x2="{xb + _BOX_W / 2:.1f}" y2="{yb:.1f}" stroke="#555" '
                       f'stroke-width="1.2" marker-end="url(#arrow)"/>')
    for i, (x, y) in pos.items():
        node = labels[i]
        fill = _COLORS.get(node.get("kind", "op"), "#fde2cf")
        label = node.get("label", i)
        if len(label) > 34:
            label = label[:33] + "…"
        out.append(f'<g class="node {html.escape(node.get("kind", "op"))}">'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{_BOX_W}" height="{_BOX_H}" rx="6" '
                   f'fill="{fill}" stroke="#666"/>'
                   f'<text x="{x + _BOX_W / 2:.1f}" y="{y + _BOX_H / 2 + 4:.1f}" font-size="11" '
                   f'font-family="monospace" text-anchor="middle">{html.escape(label)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def svg_lanes(streams: dict[str, str], title: str = "") -> str:
    """An SVG picture of a graph's streams: a lane (column) per stream, the main stream
    first; ``streams`` maps node -> stream in graph order, one row per node, so what is
    issued beside what is visible."""
    names = list(dict.fromkeys(["main", *streams.values()]))
    if "main" not in streams.values():
        names.remove("main")
    top, row_h = (40 if title else 22), 26
    width = len(names) * (_BOX_W + _GAP_X) + _GAP_X
    height = top + len(streams) * row_h + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    if title:
        out.append(f'<text x="6" y="13" font-size="12" font-family="sans-serif" '
                   f'font-weight="bold">{html.escape(title)}</text>')
    for k, name in enumerate(names):
        x = _GAP_X + k * (_BOX_W + _GAP_X)
        out.append(f'<g class="lane"><rect x="{x - 6}" y="{top - 20}" width="{_BOX_W + 12}" '
                   f'height="{height - top + 16}" fill="{_LANE_FILL[k % len(_LANE_FILL)]}" '
                   f'stroke="#bbb" rx="6"/><text x="{x + _BOX_W / 2}" y="{top - 6}" '
                   f'font-size="12" font-family="sans-serif" text-anchor="middle" '
                   f'font-weight="bold">{html.escape(name)}</text></g>')
    for r, (node, name) in enumerate(streams.items()):
        x = _GAP_X + names.index(name) * (_BOX_W + _GAP_X)
        y = top + r * row_h
        label = node if len(node) <= 34 else node[:33] + "…"
        out.append(f'<g class="node"><rect x="{x}" y="{y}" width="{_BOX_W}" height="{row_h - 4}" '
                   f'rx="5" fill="#fde2cf" stroke="#666"/><text x="{x + _BOX_W / 2}" '
                   f'y="{y + row_h / 2 + 2}" font-size="11" font-family="monospace" '
                   f'text-anchor="middle">{html.escape(label)}</text></g>')
    out.append("</svg>")
    return "".join(out)


_LANE_FILL = ("#f4f6fa", "#eef8ee", "#fbf3e6", "#f3eef8")


_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ccc;padding:4px 10px;
font-size:13px;text-align:left} th{background:#f3f3f3} .num{text-align:right}
.region{border:1px solid #ddd;border-radius:8px;padding:10px;margin:12px 0}
.pair{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px;max-height:420px}
.legend span{display:inline-block;padding:2px 8px;margin-right:8px;border:1px solid #888;border-radius:4px;font-size:12px}
"""  # noqa: E501


def _template(name: str):
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("op_sdk.app", "templates"),
                             autoescape=jinja2.select_autoescape(["html.j2"]),
                             keep_trailing_newline=True, trim_blocks=False)
    return env.get_template(name)


def _context(data: dict, pictures) -> dict:
    regions = []
    for reg in data.get("regions", []):
        regions.append({**reg, "anchor": reg.get("anchor", ""), **pictures(reg)})
    return {"title": data.get("title", "op_sdk fusion report"), "facts": data.get("facts", {}),
            "fusions": data.get("fusions", []), "regions": regions,
            "skipped": data.get("skipped", {}), "near_misses": data.get("near_misses", []),
            "dumps": data.get("dumps", []), "streams": data.get("streams", []),
            "scopes": data.get("scopes", []), "trace": data.get("trace")}


def render_html(data: dict) -> str:
    """The page (templates/report.html.j2): every value escaped, the SVG pictures inline."""
    from markupsafe import Markup

    def pictures(reg):
        return {"before_svg": Markup(svg_graph(reg["before"], "before")),
                "after_svg": Markup(svg_graph(reg["after"], "after"))}

    context = _context(data, pictures)
    context["streams"] = [{**g, "svg": Markup(svg_lanes(g["nodes"], g["graph"]))}
                          for g in context["streams"]]
    return _template("report.html.j2").render(css=_CSS, **context)


def mermaid(graph: dict) -> str:
    shape = {"input": ("([", "])"), "output": ("([", "])"), "fused": ("[[", "]]"), "op": ("[", "]")}
    ids = {n["id"]: f"n{k}" for k, n in enumerate(graph["nodes"])}
    lines = ["flowchart TD"]
    for n in graph["nodes"]:
        a, b = shape.get(n.get("kind", "op"), ("[", "]"))
        label = n.get("label", n["id"]).replace('"', "'")
        lines.append(f'    {ids[n["id"]]}{a}"{label}"{b}')
    for a, b in graph["edges"]:
        if a in ids and b in ids:
            lines.append(f"    {ids[a]} --> {ids[b]}")
    return "\n".join(lines)


def render_markdown(data: dict) -> str:
    """The same report as Markdown (templates/report.md.j2) with Mermaid diagrams."""
    def pictures(reg):
        return {"before_mermaid": mermaid(reg["before"]), "after_mermaid": mermaid(reg["after"])}

    return _template("report.md.j2").render(**_context(data, pictures))

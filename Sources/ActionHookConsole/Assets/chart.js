// Small SVG charts drawn by the page: stacked bars of replies per bucket by outcome, and a line of
// delivery latency. Shapes get classes, not inline styles, so the strict style policy holds.

import { svg } from "./dom.js";

export const OUTCOMES = [
  "accepted", "declined", "snoozed", "snooze_limit_reached", "commented", "recorded", "unmatched", "expired", "superseded",
];

const WIDTH = 600;
const HEIGHT = 140;
const PAD = 24;

function frame(label, maxLabel) {
  return [
    svg("line", { x1: PAD, y1: HEIGHT - PAD, x2: WIDTH - 4, y2: HEIGHT - PAD, class: "axis" }),
    svg("line", { x1: PAD, y1: 4, x2: PAD, y2: HEIGHT - PAD, class: "axis" }),
    svg("text", { x: PAD + 4, y: 14, class: "chart-label" }, maxLabel),
    svg("text", { x: WIDTH - 4, y: HEIGHT - 6, class: "chart-label end" }, label),
  ];
}

/** Replies per bucket, stacked by outcome. */
export function repliesChart(series, bucketSeconds) {
  const totals = series.map((bucket) => OUTCOMES.reduce((sum, outcome) => sum + (bucket.replies[outcome] || 0), 0));
  const max = Math.max(1, ...totals);
  const step = (WIDTH - PAD - 8) / Math.max(1, series.length);
  const bars = [];
  series.forEach((bucket, index) => {
    let y = HEIGHT - PAD;
    for (const outcome of OUTCOMES) {
      const count = bucket.replies[outcome] || 0;
      if (!count) continue;
      const height = (count / max) * (HEIGHT - PAD - 20);
      y -= height;
      bars.push(
        svg(
          "rect", { x: PAD + 2 + index * step, y, width: Math.max(1, step - 1), height, class: `bar outcome-${outcome}` },
          svg("title", {}, `${bucket.start}: ${count} ${outcome}`),
        ),
      );
    }
  });
  return svg(
    "svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart chart-replies", role: "img", "aria-label": "Replies per bucket by outcome" },
    frame(`replies per ${bucketSeconds / 60} min`, `${max}`),
    bars,
  );
}

/** Mean delivery latency (due to delivered) per bucket, with the maximum as dots. */
export function latencyChart(series) {
  const values = series.map((bucket) => bucket.latencyMsAverage);
  const max = Math.max(1, ...series.map((bucket) => bucket.latencyMsMax || 0));
  const step = (WIDTH - PAD - 8) / Math.max(1, series.length - 1);
  const x = (index) => PAD + 2 + index * step;
  const y = (value) => HEIGHT - PAD - (value / max) * (HEIGHT - PAD - 20);
  const points = [];
  const dots = [];
  values.forEach((value, index) => {
    if (value === null || value === undefined) return;
    points.push(`${x(index).toFixed(1)},${y(value).toFixed(1)}`);
    dots.push(
      svg("circle", { cx: x(index), cy: y(series[index].latencyMsMax), r: 2, class: "latency-max" },
        svg("title", {}, `${series[index].start}: max ${series[index].latencyMsMax} ms`)),
    );
  });
  return svg(
    "svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart chart-latency", role: "img", "aria-label": "Delivery latency" },
    frame("delivery latency, ms (line: mean, dots: max)", `${max} ms`),
    points.length > 1 ? svg("polyline", { points: points.join(" "), class: "latency-line" }) : null,
    dots,
  );
}

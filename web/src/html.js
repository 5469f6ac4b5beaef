// htm bound to Preact: components without a JSX step.
import { h } from "preact";
import htm from "htm";

export const html = htm.bind(h);

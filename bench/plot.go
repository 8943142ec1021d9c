package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotRollout draws pods available over time during the rollout, one line
// per run: blues for upstream, reds for everynode, greens for kruise.
func plotRollout(runs []*runResult, path string, nodes int) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Rollout on %d nodes: pods available over time", nodes)
	p.X.Label.Text = "seconds since apply"
	p.Y.Label.Text = "nodes with an available daemon pod"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	blues := []color.RGBA{{31, 119, 180, 255}, {23, 190, 207, 255}, {44, 60, 140, 255}}
	reds := []color.RGBA{{214, 39, 40, 255}, {255, 127, 14, 255}, {148, 30, 60, 255}}
	greens := []color.RGBA{{44, 160, 44, 255}, {140, 200, 60, 255}, {20, 90, 50, 255}}
	var ia, ib, ic int
	for _, r := range runs {
		if len(r.series) == 0 {
			continue
		}
		xy := make(plotter.XYs, 0, len(r.series)+1)
		xy = append(xy, plotter.XY{X: 0, Y: 0})
		for _, pt := range r.series {
			xy = append(xy, plotter.XY{X: pt.t, Y: pt.n})
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("plotting: %w", err)
		}
		l.Width = vg.Points(1.5)
		switch r.system {
		case upstream.name:
			l.Color = blues[ia%len(blues)]
			ia++
		case kruise.name:
			l.Color = greens[ic%len(greens)]
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			ic++
		default:
			l.Color = reds[ib%len(reds)]
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			ib++
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s r%d", r.system, r.round), l)
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	return nil
}

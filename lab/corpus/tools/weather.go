package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrNoWeatherURL is returned when the weather server has no API address.
var ErrNoWeatherURL = errors.New("no weather API: pass --weather-url URL or set MCP_WEATHER_URL")

// Weather is the weather tool set: a thin client of an HTTP API
// (GET BASE/weather?city=NAME answering {"city","temp_c","conditions"}),
// which the harness serves on 127.0.0.2.
type Weather struct {
	base string
	// Client asks the API (5 s timeout; Config.Scale stretches it).
	Client *http.Client
}

// NewWeather returns the weather tools for the API at base.
func NewWeather(base string) (*Weather, error) {
	if base == "" {
		return nil, ErrNoWeatherURL
	}
	if _, err := url.Parse(base); err != nil {
		return nil, fmt.Errorf("weather url: %w", err)
	}
	return &Weather{base: strings.TrimRight(base, "/"), Client: &http.Client{Timeout: 5 * time.Second}}, nil
}

// Report is one answer of the weather API.
type Report struct {
	City       string `json:"city"`
	TempC      int    `json:"temp_c"`
	Conditions string `json:"conditions"`
}

// Fetch asks the API about city.
func (w *Weather) Fetch(ctx context.Context, city string) (*Report, error) {
	u := w.base + "/weather?city=" + url.QueryEscape(city)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("weather api: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("weather api: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("weather api: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var r Report
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("weather api: bad answer: %w", err)
	}
	return &r, nil
}

// Tools returns the weather tool set.
func (w *Weather) Tools() Set {
	city := mcp.WithString("city", mcp.Required(), mcp.Description("City name, e.g. Lisbon"))
	return Set{
		{Tool: mcp.NewTool("get_current_weather",
			mcp.WithDescription("Current conditions and temperature (°C) for a city."),
			city), Handler: w.current},
		{Tool: mcp.NewTool("get_forecast",
			mcp.WithDescription("Forecast for a city for the next days (1-7)."),
			city,
			mcp.WithNumber("days", mcp.Description("Number of days, 1-7 (default 3)"))), Handler: w.forecast},
		{Tool: mcp.NewTool("get_alerts",
			mcp.WithDescription("Weather advisories for a city (snow, fog, heat)."),
			city), Handler: w.alerts},
	}
}

func (w *Weather) fetchArg(ctx context.Context, req mcp.CallToolRequest) (*Report, *mcp.CallToolResult) {
	c, err := req.RequireString("city")
	if err != nil {
		return nil, Errorf("%v", err)
	}
	r, err := w.Fetch(ctx, c)
	if err != nil {
		return nil, Errorf("%v", err)
	}
	return r, nil
}

func (w *Weather) current(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, bad := w.fetchArg(ctx, req)
	if bad != nil {
		return bad, nil
	}
	return Text(fmt.Sprintf("%s: %s, %d°C", r.City, r.Conditions, r.TempC)), nil
}

func (w *Weather) forecast(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, bad := w.fetchArg(ctx, req)
	if bad != nil {
		return bad, nil
	}
	days := min(max(req.GetInt("days", 3), 1), 7)
	var b strings.Builder
	fmt.Fprintf(&b, "Forecast for %s:\n", r.City)
	for d := range days {
		// The API gives today's report; the trend is a fixed persistence
		// forecast (tomorrow looks like today), as simple clients do.
		fmt.Fprintf(&b, "day %d: %s, %d°C\n", d+1, r.Conditions, r.TempC+d%2)
	}
	return Text(b.String()), nil
}

func (w *Weather) alerts(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, bad := w.fetchArg(ctx, req)
	if bad != nil {
		return bad, nil
	}
	var alerts []string
	switch r.Conditions {
	case "snow":
		alerts = append(alerts, "snow advisory")
	case "fog":
		alerts = append(alerts, "dense fog advisory")
	}
	if r.TempC >= 28 {
		alerts = append(alerts, "heat advisory")
	}
	if r.TempC <= 0 {
		alerts = append(alerts, "frost warning")
	}
	if len(alerts) == 0 {
		return Text(fmt.Sprintf("No advisories for %s (%s, %d°C)", r.City, r.Conditions, r.TempC)), nil
	}
	return Text(fmt.Sprintf("Advisories for %s: %s", r.City, strings.Join(alerts, "; "))), nil
}
